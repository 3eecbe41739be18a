"""Discrete-event timing of an MSCCL++ execution plan on a Topology (``collc simulate PLAN.json``).

The same fluid-flow network as the XML event model (``collc.sim.event``: messages cross
``Router.shares`` with max-min fair rates, ``alpha_us`` of software cost per message,
``hop_latency_us`` per link crossed, ``reduce_us_per_byte`` per byte reduced, local copies
free), with the executor's one-sided semantics instead of MSCCL's FIFOs:

* every threadblock runs its ops in order; ``nop`` and ``barrier`` cost nothing here;
* ``put``/``ppkt`` is a message from the tb's GPU to the GPU of the remote buffer, of the
  op's chunks x chunk bytes (x 2 for LL packets, which carry a flag beside each word); the
  tb is busy until the last byte has left (a memory-channel put is a copy by the tb's
  threads), so there is no FIFO and no receiver-side slot accounting: a slot is free by
  construction of the plan;
* ``signal`` reaches the paired channel one hop latency after the tb issues it (after the data
  it follows; a put and its signal are one message of the XML model, whose ``alpha_us`` the put
  pays); ``wait`` blocks until an unconsumed signal is there;
* on a **port** channel (between IPC domains: the NIC) every ``put``/``pws``/``signal``/``flush`` is a
  request to the GPU's proxy (MSCCL++ runs one proxy thread per rank, which serves its FIFO in
  order): the proxy spends ``proxy_us`` on each, one after the other, and the tb goes on at once
  (``flush`` excepted); a put's message leaves once the proxy has served it, then pays ``alpha_us``
  and flows like any other over the route's links (the NIC's and the network switch's bandwidth,
  from the topology); a ``signal`` (or the signal of a ``pws``, one request with its data) is sent
  when the proxy serves it and follows the channel's data in flight, arriving the route's latency
  after the last of it left; ``flush`` blocks its tb until the proxy has served it and the
  channels it names have no message in flight;
* every message and signal arrives ``hop_latency_us`` x hops plus the route's link latencies (the
  topology's ``lat=``, e.g. a NIC's) after its last byte left: unlike the XML model (which adds
  ``hop_latency_us`` only) the topology's latencies count here;
* ``sem_release``/``sem_acquire`` are counting semaphores between tbs of one GPU, free;
* ``upkt``/``repkt`` wait until the packets of their source slots have arrived (the flag
  poll), then cost nothing (``repkt``: the reduction cost);
* ``copy`` is free, ``re``/``rre``-style reductions pay ``reduce_us_per_byte``.

At size ``S`` (nccl-tests' size; the gathered output for allgather) a chunk is
``input bytes / input_chunks`` with input bytes ``S / N`` for allgather and ``S`` otherwise.
* LL across hosts: ``cpkt`` (staging packets in the own scratch) is a local copy, free; a port
  ``rppkt`` is a proxy message of twice the bytes, like a port ``put``; the receiver's ``upkt``/
  ``repkt`` wait for it to land.

Ops the model does not know (``get``, ``ppkt`` over port channels, ``rppkt`` over memory channels,
switch ops) are refused: the plan is timed only where the two models agree.

>>> from collc.driver import compile_plan
>>> from collc.ir.collective import CollKind
>>> from collc.topology import parse_spec
>>> topo = parse_spec("ring:4:hosts=1")      # one host: memory channels need CUDA IPC
>>> plan = compile_plan(topo, "ring", CollKind.ALLGATHER, inplace=False).plan
>>> [round(t, 3) for t in time_plan(plan, topo, [4000], alpha_us=1.0)]
[6.0]

Across two hosts (``lat=2``: 2 us per link, 10 GB/s): each rank's ``pws`` waits for the proxy (1 us),
pays alpha (5 us), flows 100000 B at 10000 B/us (10 us) and lands 2 us later; the receiver's
``signal`` back costs another proxy request (1 us) and 2 us of latency:

>>> topo = parse_spec("ring:2:bw=10,lat=2:hosts=2")
>>> plan = compile_plan(topo, "ring", CollKind.ALLGATHER, inplace=False).plan
>>> time_plan(plan, topo, [200000], alpha_us=5.0, proxy_us=1.0)
[21.0]
"""

from __future__ import annotations

import heapq
import math
from collections import defaultdict
from collections.abc import Iterable

from collc.compiler.mscclpp.plan import ChannelType, LocalBuff, OpName, Plan, RemoteBuff
from collc.errors import CollcError
from collc.sim.event import max_min_rates
from collc.sim.routing import Router
from collc.sim.runner import PROXY_US
from collc.topology import Topology

BYTES_PER_US_PER_GBPS = 1e3
_FREE = {OpName.NOP, OpName.BARRIER, OpName.COPY, OpName.FLUSH, OpName.COPY_PACKETS}
_KNOWN = _FREE | {OpName.PUT, OpName.PUT_PACKETS, OpName.SIGNAL, OpName.WAIT, OpName.RELAXED_SIGNAL,
                  OpName.RELAXED_WAIT, OpName.SEM_ACQUIRE, OpName.SEM_RELEASE, OpName.UNPACK_PACKETS,
                  OpName.REDUCE_PACKETS, OpName.REDUCE, OpName.PUT_WITH_SIGNAL, OpName.READ_PUT_PACKETS}
_PORT_OK = {OpName.PUT, OpName.PUT_WITH_SIGNAL, OpName.SIGNAL, OpName.WAIT, OpName.FLUSH, OpName.READ_PUT_PACKETS}
#: Port ops the proxy carries as messages, and the bytes on the wire per data byte (packets: data + flags).
_PORT_MSG = {OpName.PUT: 1.0, OpName.PUT_WITH_SIGNAL: 1.0, OpName.READ_PUT_PACKETS: 2.0}


def timing_refusal(plan: Plan) -> str | None:
    """Why this plan cannot be timed by the model (an op or channel it does not know), or None."""
    for g in plan.gpus:
        for tb in g.threadblocks:
            for op in tb.flat_ops():
                if op.name not in _KNOWN:
                    return f"gpu {g.id} tb {tb.id}: op {op.name.value} is not in the timing model"
                if op.channel_type is ChannelType.PORT and op.name in _PORT_OK:
                    continue
                if op.channel_type not in (None, ChannelType.MEMORY) or op.name in (OpName.PUT_WITH_SIGNAL,
                                                                                   OpName.READ_PUT_PACKETS):
                    kind = op.channel_type.value if op.channel_type is not None else "no"
                    return f"gpu {g.id} tb {tb.id}: op {op.name.value} on {kind} channels is not in the timing model"
    return None


def _input_bytes(plan: Plan, size: int) -> float:
    return size / plan.nranks if plan.collective == "allgather" else float(size)


def time_plan(plan: Plan, topology: Topology, sizes: Iterable[int], *, alpha_us: float = 0.0,
              link_bw: float | None = None, hop_latency_us: float = 0.0, reduce_us_per_byte: float = 0.0,
              router: Router | None = None, proxy_us: float = PROXY_US) -> list[float]:
    """Completion time (us) of one launch of ``plan`` at each size; see the module docstring."""
    why = timing_refusal(plan)
    if why is not None:
        raise CollcError(why)
    if topology.nranks != plan.nranks:
        raise CollcError(f"the plan has {plan.nranks} ranks but {topology.name} has {topology.nranks}")
    rt = router or Router(topology)
    if proxy_us < 0 or not math.isfinite(proxy_us):
        raise CollcError(f"the proxy cost must be a finite number >= 0 (us), got {proxy_us!r}")
    return [_run(plan, rt, size, alpha_us, link_bw, hop_latency_us, reduce_us_per_byte, proxy_us) for size in sizes]


#: One span of a threadblock's time for ``trace_plan``: (tb index, kind, start us, end us, peer, bytes),
#: kind send, receive (waiting for packets), reduce or wait (a signal or semaphore); as ``collc.sim.event``.
Span = tuple[int, str, float, float, int, float]


def trace_plan(plan: Plan, topology: Topology, size: int, *, alpha_us: float = 0.0, link_bw: float | None = None,
               hop_latency_us: float = 0.0, reduce_us_per_byte: float = 0.0, proxy_us: float = PROXY_US
               ) -> tuple[float, tuple[tuple[int, int], ...], list[Span]]:
    """``time_plan`` at one size, with each tb's spans: (time, (gpu, tb) per tb index, spans)."""
    why = timing_refusal(plan)
    if why is not None:
        raise CollcError(why)
    if topology.nranks != plan.nranks:
        raise CollcError(f"the plan has {plan.nranks} ranks but {topology.name} has {topology.nranks}")
    spans: list[Span] = []
    t = _run(plan, Router(topology), size, alpha_us, link_bw, hop_latency_us, reduce_us_per_byte, proxy_us, spans)
    names = tuple((g.id, tb.id) for g in plan.gpus for tb in g.threadblocks)
    return t, names, spans


def _run(plan: Plan, rt: Router, size: int, alpha: float, link_bw: float | None, hop: float, rupb: float,
         proxy: float, trace: list[Span] | None = None) -> float:
    if size <= 0:
        raise CollcError(f"message size must be positive, got {size}")
    chunk = _input_bytes(plan, size) / max(plan.gpus[0].input_chunks, 1)
    # channel ends: (rank, gpu channel index) -> (peer, index of the paired channel at the peer)
    # (rank, channel type, index) -> (peer, type, index of the paired channel at the peer)
    pair: dict[tuple[int, ChannelType, int], tuple[int, ChannelType, int]] = {}
    for ck in (ChannelType.MEMORY, ChannelType.PORT):
        for g in plan.gpus:
            seen: dict[int, int] = defaultdict(int)
            for idx, p in enumerate(g.peers(ck)):
                k = seen[p]
                seen[p] += 1
                other = [i for i, q in enumerate(plan.gpus[p].peers(ck)) if q == g.id] if p < plan.nranks else []
                if k < len(other):
                    pair[(g.id, ck, idx)] = (p, ck, other[k])
    tbs = [(g, tb) for g in plan.gpus for tb in g.threadblocks]
    # a port channel owns its messages (its signals follow them): owner ids after the tbs'
    proxy_id = {(g.id, idx): len(tbs) + k for k, (g, idx) in
                enumerate((g, idx) for g in plan.gpus for idx in range(len(g.peers(ChannelType.PORT))))}
    deferred: dict[int, list[tuple[tuple[int, ChannelType, int], float]]] = defaultdict(list)  # owner ->
    # (signal, when the proxy sent it) behind the channel's data
    proxy_free: dict[int, float] = defaultdict(float)                  # rank -> when its proxy is next idle
    pending: set[int] = set()                                          # port flows before their start
    flushing: dict[int, float] = {}                                    # tb -> when the proxy serves its flush
    pc = [0] * len(tbs)
    busy_until = [0.0] * len(tbs)
    signals: dict[tuple[int, ChannelType, int], list[float]] = defaultdict(list)   # arrival times, unconsumed
    sems: dict[tuple[int, int], int] = defaultdict(int)
    landed: dict[tuple[int, int], float] = {}                          # (rank, scratch chunk) -> arrival
    flows: dict[int, tuple[float, list[tuple[int, float]], int]] = {}  # id -> (bytes left, links, tb)
    flow_dst: dict[int, tuple[int, list[int], float]] = {}             # id -> (rank, chunks, latency)
    link_id: dict[tuple[int, int], int] = {}
    cap: list[float] = []
    timers: list[tuple[float, int, str, int]] = []                     # (time, seq, kind, payload)
    seq = 0
    now = 0.0
    next_flow = 0
    rates: dict[int, float] = {}
    starting: set[int] = set()                                         # tbs whose puts wait for alpha

    def links_of(a: int, b: int) -> list[tuple[int, float]]:
        out = []
        for link, frac in rt.shares(a, b):
            if link not in link_id:
                link_id[link] = len(cap)
                cap.append((link_bw if link_bw is not None else rt.capacity(link)) * BYTES_PER_US_PER_GBPS)
            out.append((link_id[link], frac))
        return out

    chan_cache: dict[tuple[int, ChannelType], tuple[int, ...]] = {}
    dirty: set[int] = set(range(plan.nranks))                          # ranks whose tbs may step now
    blocked: dict[int, tuple[str, float]] = {}                         # tracing: tb -> (why, since)
    sending: dict[int, tuple[float, list[tuple[int, float]]]] = {}     # tracing: tb -> (since, (peer, bytes)s)

    def step(i: int) -> bool:
        if trace is None:
            return _step(i)
        op = tbs[i][1].ops[pc[i]]
        was = busy_until[i]
        moved = _step(i)
        if not moved and was <= now + 1e-12 and i not in blocked:
            why = "receive" if op.name in (OpName.UNPACK_PACKETS, OpName.REDUCE_PACKETS) else "wait"
            blocked[i] = (why, now)
        elif moved:
            if i in blocked:
                why, since = blocked.pop(i)
                if now > since:
                    trace.append((i, why, since, now, -1, 0.0))
            if busy_until[i] != math.inf and busy_until[i] > now:
                trace.append((i, "reduce", now, busy_until[i], -1, 0.0))
        return moved

    def latency(a: int, b: int) -> float:
        """After its last byte left ``a``, a message is at ``b`` this much later: hops x hop latency plus
        the route's link latencies (the topology's)."""
        return hop * rt.hops(a, b) + sum(f * rt.latency(link) for link, f in rt.shares(a, b))

    def serve(rank: int) -> float:
        """A request to ``rank``'s proxy: when the proxy has served it (in FIFO order)."""
        nonlocal seq
        proxy_free[rank] = max(proxy_free[rank], now) + proxy
        heapq.heappush(timers, (proxy_free[rank], seq, "wake", rank))
        seq += 1
        return proxy_free[rank]

    def send_signal(key: tuple[int, ChannelType, int], sent: float | None = None) -> None:
        """A signal: at the peer its latency later; on a port channel sent when the proxy serves it
        (``sent``: with the put it rides on), behind the channel's data in flight."""
        nonlocal seq
        g_id, kind, c = key
        at = now
        if kind is ChannelType.PORT:
            at = serve(g_id) if sent is None else sent
            owner = proxy_id[(g_id, c)]
            if any(v[2] == owner for v in flows.values()):
                deferred[owner].append((key, at))
                return
        p, pk, idx = pair[key]
        signals[(p, pk, idx)].append(at + latency(g_id, p))
        dirty.add(p)
        heapq.heappush(timers, (at + latency(g_id, p), seq, "wake", p))
        seq += 1

    def _step(i: int) -> bool:
        nonlocal seq, next_flow
        g, tb = tbs[i]
        if busy_until[i] > now + 1e-12:
            return False
        op = tb.ops[pc[i]]
        kind = op.channel_type if op.channel_type is not None else ChannelType.MEMORY
        chans = chan_cache.get((i, kind))
        if chans is None:
            chans = chan_cache[(i, kind)] = tb.channel_list(kind)
        name = op.name
        if name in (OpName.WAIT, OpName.RELAXED_WAIT):
            keys = [(g.id, kind, chans[c]) for c in op.channels]
            if any(not any(t <= now + 1e-12 for t in signals[k]) for k in keys):
                return False
            for k in keys:
                signals[k].remove(min(signals[k]))
        elif name in (OpName.SIGNAL, OpName.RELAXED_SIGNAL):
            for c in op.channels:
                send_signal((g.id, kind, chans[c]))
        elif name is OpName.FLUSH:
            if i not in flushing:           # the request is queued once, however long the tb then waits
                flushing[i] = serve(g.id)
            owners = {proxy_id[(g.id, chans[c])] for c in op.channels[:len(op.dsts)]}
            if flushing[i] > now + 1e-12 or any(v[2] in owners for v in flows.values()):
                return False
            del flushing[i]
        elif kind is ChannelType.PORT and name in _PORT_MSG:
            rbs = tb.buffer_list(kind)
            for e, b in enumerate(op.dsts):
                assert isinstance(b, RemoteBuff)
                c = chans[op.channels[e]]
                peer, owner = g.remote_buffers[rbs[b.buffer_id]].rank, proxy_id[(g.id, c)]
                fid = next_flow
                next_flow += 1
                flows[fid] = (b.size * chunk * _PORT_MSG[name], links_of(g.id, peer), owner)
                flow_dst[fid] = (peer, list(range(b.index, b.index + b.size)), latency(g.id, peer))
                served = serve(g.id)
                pending.add(fid)            # it flows once the proxy has served it, after the software cost
                heapq.heappush(timers, (served + alpha, seq, "flow", fid))
                seq += 1
                if name is OpName.PUT_WITH_SIGNAL:
                    send_signal((g.id, kind, c), served)
        elif name is OpName.SEM_RELEASE:
            for s in op.semaphore_ids or ():
                sems[(g.id, s)] += 1
        elif name is OpName.SEM_ACQUIRE:
            need: dict[int, int] = defaultdict(int)
            for s in op.semaphore_ids or ():
                need[s] += 1
            if any(sems[(g.id, s)] < cnt for s, cnt in need.items()):
                return False
            for s, cnt in need.items():
                sems[(g.id, s)] -= cnt
        elif name in (OpName.PUT, OpName.PUT_PACKETS):
            rbs = tb.buffer_list(ChannelType.MEMORY)
            by_peer: dict[int, list[int]] = defaultdict(list)
            for b in op.dsts:
                assert isinstance(b, RemoteBuff)
                peer = g.remote_buffers[rbs[b.buffer_id]].rank
                by_peer[peer] += list(range(b.index, b.index + b.size))
            factor = 2.0 if name is OpName.PUT_PACKETS else 1.0
            if trace is not None and by_peer:
                sending[i] = (now, [(p, len(c) * chunk * factor) for p, c in sorted(by_peer.items())])
            for peer, chunks in sorted(by_peer.items()):
                fid = next_flow
                next_flow += 1
                flows[fid] = (len(chunks) * chunk * factor, links_of(g.id, peer), i)
                flow_dst[fid] = (peer, chunks, latency(g.id, peer))
            busy_until[i] = math.inf        # until its flows have left
            starting.add(i)                 # they flow after the message's software cost
            heapq.heappush(timers, (now + alpha, seq, "start", i))
            seq += 1
            pc[i] += 1
            return True
        elif name in (OpName.UNPACK_PACKETS, OpName.REDUCE_PACKETS):
            srcs = op.srcs[1:] if name is OpName.REDUCE_PACKETS else op.srcs[:1]
            need_chunks = [(g.id, b.index + k) for b in srcs if isinstance(b, LocalBuff) for k in range(b.size)]
            if any(landed.get(c, math.inf) > now + 1e-12 for c in need_chunks):
                return False
            if name is OpName.REDUCE_PACKETS:
                busy_until[i] = now + rupb * sum(b.size for b in op.srcs[1:]) * chunk
        elif name is OpName.REDUCE:
            busy_until[i] = now + rupb * sum(b.size for b in op.srcs[1:]) * chunk
        pc[i] += 1
        return True

    # Only the tbs of a GPU whose state changed are tried again: its own step, a signal, packets or a
    # semaphore for it, its proxy or a flow of its own done, a timer of it, a tb's busy time over.  The
    # GPUs are visited in rank order, each pass as a full scan would (a GPU dirtied by a later one waits
    # for the next pass), so the times are those of trying every tb.
    tbs_of = [[i for i, (g, _) in enumerate(tbs) if g.id == r] for r in range(plan.nranks)]
    rank_of = {owner: r for (r, _), owner in proxy_id.items()}
    rank_of.update((i, g.id) for i, (g, _) in enumerate(tbs))
    while True:
        while dirty:
            for r in range(plan.nranks):
                if r not in dirty:
                    continue
                dirty.discard(r)
                for i in tbs_of[r]:
                    while pc[i] < len(tbs[i][1].ops) and step(i):
                        dirty.add(r)
        active = {f: v for f, v in flows.items() if v[2] not in starting and f not in pending}
        live = sorted(active)
        rate_list = max_min_rates([active[f][1] for f in live], cap) if live else []
        rates = dict(zip(live, rate_list))
        ends = {f: now + active[f][0] / rates[f] if rates[f] > 0 else math.inf for f in live}
        finish = min(ends.values(), default=math.inf)
        nxt_timer = timers[0][0] if timers else math.inf
        nxt_busy = min((b for b in busy_until if now + 1e-12 < b < math.inf), default=math.inf)
        nxt = min(finish, nxt_timer, nxt_busy)
        if nxt == math.inf:
            break
        dt = nxt - now
        for f in live:
            left, links, tbi = flows[f]
            flows[f] = (left - rates[f] * dt if rates[f] != math.inf else 0.0, links, tbi)
        if nxt_busy <= nxt + 1e-12:
            dirty.update(rank_of[i] for i, b in enumerate(busy_until) if now + 1e-12 < b <= nxt + 1e-12)
        now = nxt
        while timers and timers[0][0] <= now + 1e-12:
            _, _, kind, payload = heapq.heappop(timers)
            if kind == "start":
                starting.discard(payload)
            elif kind == "flow":
                pending.discard(payload)
            elif payload >= 0:
                dirty.add(payload)
        # a flow whose end is this event is done, whatever float rounding left of it: on very fast links
        # (or late in a long run) its remaining bytes can last less than one ulp of ``now``, so that the
        # next event would be ``now`` again and the clock would never move
        for f in [f for f in live if ends[f] <= now or flows[f][0] <= 1e-9 * max(chunk, 1.0)]:
            _, _, tbi = flows.pop(f)
            peer, chunks, lat = flow_dst.pop(f)
            for c in chunks:
                landed[(peer, c)] = now + lat
            dirty.update((peer, rank_of[tbi]))
            if lat > 0:
                heapq.heappush(timers, (now + lat, seq, "wake", peer))
                seq += 1
            if tbi >= len(tbs):
                if not any(v[2] == tbi for v in flows.values()):
                    for key, left in deferred.pop(tbi, []):     # the channel's signals follow its data
                        p, pk, idx = pair[key]
                        signals[(p, pk, idx)].append(max(now, left) + latency(key[0], p))
                        dirty.add(p)
                        heapq.heappush(timers, (max(now, left) + latency(key[0], p), seq, "wake", p))
                        seq += 1
                continue
            if not any(v[2] == tbi for v in flows.values()):
                busy_until[tbi] = now
                if trace is not None and tbi in sending:
                    since, sent = sending.pop(tbi)
                    trace.extend((tbi, "send", since, now, peer, nbytes) for peer, nbytes in sent)
    if any(pc[i] < len(tbs[i][1].ops) for i in range(len(tbs))):
        i = next(i for i in range(len(tbs)) if pc[i] < len(tbs[i][1].ops))
        raise CollcError(f"the plan blocks at {size} bytes: gpu {tbs[i][0].id} tb {tbs[i][1].id} at op {pc[i]}")
    return max([now] + [b for b in busy_until if b < math.inf])
