"""A simulation of the MSCCL++ executor running one launch of a plan, with symbolic data.

Every threadblock runs its ops in order; ``wait`` blocks until its paired channel has been signalled
once more, ``sem_acquire`` until its semaphore is positive, ``barrier`` until ``num_threadblocks``
threadblocks arrived, and a packet read until its packet was written.  Data are sets of contributions
(rank, input chunk) per sub-chunk, so the final output is compared with the collective's
postcondition (:mod:`collc.ir.collective`).  Orderings are vector clocks: each threadblock is two
actors (its control threads, which signal, wait and acquire, and all its threads, which move data;
only ``nop`` and ``barrier`` join them), and each port channel's proxy is one more.  An access that no
ordering puts after a conflicting one is a race.  What each op does is read from the executor kernel,
not from its name; docs/mscclpp.md lists the model and its limits.

>>> from collc.compiler.mscclpp.plan import Gpu, Plan, Protocol
>>> plan = Plan("empty", "allreduce", Protocol.SIMPLE, True, (Gpu(0, 1, 1, 0, (), (), ()),))
>>> [f.code for f in simulate(plan)]
[]
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np
import numpy.typing as npt

from collc.check.findings import Finding
from collc.check.plan.rules import PUTS, partners, remote_target
from collc.check.plan.releases import LATEST, Release
from collc.compiler.mscclpp.plan import (Buff, BufferType, ChannelType, Gpu, LocalBuff, Op, OpName, Plan, RemoteBuff,
                                 SwitchBuff, Threadblock)
from collc.ir.collective import Buffer, CollKind, Collective

# Symbolic iterations of a pipeline op: two show the per-iteration behaviour without a message size.
PIPELINE_ITERATIONS = 2
MAX_PER_CODE = 6

Loc = tuple[int, str, int]                 # (gpu, space, sub-chunk)
Value = tuple[tuple[int, int], ...] | None  # sorted contributions; None = garbage
Clock = npt.NDArray[np.int32]              # one actor's vector clock (a row of Simulator.vc / .cvc)


def _add(a: Value, b: Value) -> Value:
    if a is None or b is None:
        return None
    return tuple(sorted(a + b))


@dataclass
class _Access:
    write: tuple[int, int, str] | None = None          # (actor, time, what)
    reads: list[tuple[int, int, str]] = field(default_factory=list)
    packet_vc: Clock | None = None                     # a packet's writer clock: its reader syncs with it


@dataclass
class _Tb:
    gpu: Gpu
    tb: Threadblock
    steps: list[tuple[Op, str, int | None, int]]   # (op, label, pipeline iteration, sub-chunks per iteration)
    pc: int = 0
    barrier_gen: int | None = None


class Simulator:
    def __init__(self, plan: Plan, release: Release = LATEST) -> None:
        self.plan = plan
        self.release = release
        self.launch = 0
        self.tag = ""
        self.findings: list[Finding] = []
        self.coll = _collective(plan)
        tbgs = [op.tbg_info.tbg_size for g in plan.gpus for tb in g.threadblocks for op in tb.flat_ops()
                if op.tbg_info is not None]
        pipelined = any(op.name is OpName.PIPELINE for g in plan.gpus for tb in g.threadblocks for op in tb.ops)
        self.G = math.lcm(1, *tbgs) * (PIPELINE_ITERATIONS if pipelined else 1)
        self.half = 1 if plan.use_double_scratch_buffer else 0
        self.partners = partners(plan)
        self.mem: dict[Loc, Value] = {}
        self.acc: dict[Loc, _Access] = {}
        # actors: control and data threads of each tb, then the proxy of each port channel
        self.actor: dict[tuple[object, ...], int] = {}
        for g in plan.gpus:
            for tb in g.threadblocks:
                self.actor[(g.id, tb.id, "C")] = len(self.actor)
                self.actor[(g.id, tb.id, "D")] = len(self.actor)
            for k in range(len(g.peers(ChannelType.PORT))):
                self.actor[(g.id, "proxy", k)] = len(self.actor)
            self.actor[(g.id, "host", 0)] = len(self.actor)
        self.hosts = frozenset(v for k, v in self.actor.items() if k[1] == "host")
        na = len(self.actor)
        # one row per actor; a join is a row-wide maximum (numpy: at thousands of actors a Python
        # loop over the row was nearly all of a plan check's time)
        self.vc: Clock = np.zeros((na, na), dtype=np.int32)     # full (release/acquire) clocks
        self.cvc: Clock = np.zeros((na, na), dtype=np.int32)    # control clocks: also carried by relaxed signals
        self.names = {v: k for k, v in self.actor.items()}
        self.signals: dict[tuple[int, ChannelType, int], list[tuple[Clock, Clock, bool]]] = {}
        self.waited: dict[tuple[int, ChannelType, int], int] = {}
        self.sems: dict[tuple[int, int], list[tuple[Clock, Clock]]] = {}
        self.sem_count: dict[tuple[int, int], int] = {}
        self.barriers: dict[tuple[int, int], tuple[int, list[tuple[int, int]], int | None]] = {}
        self.barrier_done: dict[tuple[int, int, int], tuple[Clock, Clock]] = {}
        self.counted: dict[str, int] = {}
        self.root: int | None = None
        self.said: set[str] = set()
        self.pkt_launch: dict[Loc, int] = {}     # the launch whose flag a packet slot carries
        self._snap_key: tuple[int, int] = (-1, -1)
        self._snap: Clock = np.zeros(0, dtype=np.int32)
        self.tbs = [_Tb(g, tb, self._steps(tb)) for g in plan.gpus for tb in g.threadblocks]
        self._init_data()

    # ------------------------------------------------------------------ setup
    def _steps(self, tb: Threadblock) -> list[tuple[Op, str, int | None, int]]:
        out: list[tuple[Op, str, int | None, int]] = []
        for i, op in enumerate(tb.ops):
            if op.name is OpName.PIPELINE and op.iter_context is not None:
                unit = op.iter_context.num_chunks * self.G // PIPELINE_ITERATIONS
                for k in range(PIPELINE_ITERATIONS):
                    out.extend((inner, f"{i}.{j}", k, unit) for j, inner in enumerate(op.ops or ()))
            else:
                out.append((op, str(i), None, 0))
        return out

    def _init_data(self) -> None:
        for g in self.plan.gpus:
            for c in range(g.input_chunks):
                space, base = self.place(g.id, BufferType.INPUT, g.id, True)
                for s in range((base + c) * self.G, (base + c + 1) * self.G):
                    self.mem[(g.id, space, s)] = ((g.id, c),)

    def place(self, gpu: int, t: BufferType, origin: int | None, kernel_ptr: bool) -> tuple[str, int]:
        """The storage of buffer ``t`` of ``gpu``: (space, chunk offset of the address).

        Scratch reached through a kernel pointer is the half in use; through a registered memory (a peer's
        pointer or a proxy) it is the start of the buffer.  In place, the input and output share one
        allocation: a kernel pointer is the buffer itself, while a registered memory is the allocation's
        start, to which the reader adds the offset of the buffer in *origin*'s allocation (``None``: no
        offset is added).
        """
        if t is BufferType.SCRATCH:
            return f"s{self.half if kernel_ptr else 0}", 0
        if self.coll is not None and self.coll.inplace:
            buf, _ = self.coll.alias(gpu, Buffer(t.value))
            return buf.value, 0 if origin is None else self.coll.alias(origin, Buffer(t.value))[1]
        return t.value, 0

    # ------------------------------------------------------------------ findings
    def add(self, code: str, message: str) -> None:
        if message in self.said:          # sub-chunks of one chunk give the same sentence
            return
        self.said.add(message)
        n = self.counted.get(code, 0)
        self.counted[code] = n + 1
        if n < MAX_PER_CODE:
            self.findings.append(Finding(code, message))

    # ------------------------------------------------------------------ clocks
    def _tick(self, a: int) -> int:
        t = int(self.vc[a, a]) + 1
        self.vc[a, a] = self.cvc[a, a] = t
        return t

    def _join(self, a: int, vc: Clock, cvc: Clock, full: bool = True) -> None:
        if full:
            np.maximum(self.vc[a], vc, out=self.vc[a])
        np.maximum(self.cvc[a], cvc, out=self.cvc[a])
        np.maximum(self.cvc[a], self.vc[a], out=self.cvc[a])

    def _sync(self, a: int, b: int) -> None:
        self.vc[a] = self.vc[b] = np.maximum(self.vc[a], self.vc[b])
        self.cvc[a] = self.cvc[b] = np.maximum(self.cvc[a], self.cvc[b])

    def _who(self, a: int) -> str:
        key = self.names[a]
        if key[1] == "proxy":
            return f"gpu {key[0]} port channel {key[2]} proxy"
        if key[1] == "host":
            return f"the application on gpu {key[0]}"
        return f"gpu {key[0]} tb {key[1]}"

    # ------------------------------------------------------------------ memory
    def _describe(self, loc: Loc) -> str:
        g, space, s = loc
        kind = {"i": "input", "o": "output", "s0": "scratch", "s1": "scratch (2nd half)"}
        if self.coll is not None and self.coll.inplace and self.coll.kind in (CollKind.ALLREDUCE,
                                                                              CollKind.ALLTOALL):
            kind["i"] = "input/output"
        if space.startswith("P"):
            return f"gpu {g} {kind.get(space[1:], space[1:])} packet chunk {s // self.G}"
        return f"gpu {g} {kind.get(space, space)} chunk {s // self.G}"

    def read(self, a: int, loc: Loc, what: str, packet: bool = False) -> Value:
        rec = self.acc.setdefault(loc, _Access())
        if rec.write is not None and not packet:
            wa, wt, wwhat = rec.write
            # the application's writes precede a kernel launch, which fences them: control order suffices
            seen = self.cvc[a, wa] if wa in self.hosts else self.vc[a, wa]
            if wa != a and seen < wt:
                why = "only relaxed signals order it (they order execution, not data)" \
                    if self.cvc[a, wa] >= wt else "nothing orders the write first"
                self.add("race-read", f"{what} reads {self._describe(loc)} that {wwhat} writes: {why}")
        if packet and rec.packet_vc is not None:
            # a packet read spins on the packet's flag: it observes this very write, and the data it carries
            # depends on everything its writer read before (docs/mscclpp.md, "Packets")
            np.maximum(self.vc[a], rec.packet_vc, out=self.vc[a])
            np.maximum(self.cvc[a], self.vc[a], out=self.cvc[a])
        rec.reads.append((a, int(self.vc[a, a]), what))
        if loc not in self.mem and not packet and not self.names[a][1] == "host":
            hint = ""
            if loc[1] == "s0" and self.half == 1 and self.names[a][0] != loc[0]:
                hint = (": with use_double_scratch_buffer the owner works in the second half in this launch, but "
                        "a peer's plain access reaches the first")
            self.add("uninitialised-read", f"{what} reads {self._describe(loc)}, which nothing has written{hint}")
        return self.mem.get(loc)

    def write(self, a: int, loc: Loc, value: Value, what: str) -> None:
        rec = self.acc.setdefault(loc, _Access())
        if rec.write is not None:
            wa, wt, wwhat = rec.write
            if wa != a and self.vc[a, wa] < wt and not any(r[0] == a for r in rec.reads):
                self.add("race-write", f"{what} and {wwhat} both write {self._describe(loc)} in no fixed order")
        for ra, rt, rwhat in rec.reads:
            if ra != a and self.cvc[a, ra] < rt:
                remote = self.names[a][0] != loc[0]
                code = "race-remote-write" if remote else "race-overwrite"
                hint = ""
                if self.names[ra][1] == "proxy":
                    code = "port-source-reuse"
                    hint = (f" through {self._who(ra)} (the port channel proxy reads the source of a put, or the "
                            "packets of a ppkt/rppkt, after the op returns; only a flush with dst_buff naming that "
                            "channel, a pwsf from v0.10 on, or a reply from the peer waits for it)")
                self.add(code, f"{what} overwrites {self._describe(loc)} that {rwhat} may still be reading{hint}")
                break
        rec.write = (a, int(self.vc[a, a]), what)
        rec.reads = []
        if loc[1].startswith("P"):
            self.pkt_launch[loc] = self.launch
            key = (a, int(self.vc[a, a]))
            if self._snap_key != key:
                self._snap_key, self._snap = key, self.vc[a].copy()
            rec.packet_vc = self._snap
        self.mem[loc] = value

    # ------------------------------------------------------------------ op operands
    def _slice(self, op: Op, index: int, size: int) -> range:
        """The sub-chunks of ``size`` chunks from ``index`` this tb handles (its part of a tb group)."""
        start, length = index * self.G, size * self.G
        if op.tbg_info is not None:
            part = length // op.tbg_info.tbg_size
            start, length = start + op.tbg_info.tb_id * part, part
        return range(start, start + length)

    def _iter(self, r: range, it: int | None, unit: int, at: str) -> range:
        if it is None:
            return r
        lo = it * unit
        if lo > len(r):
            self.add("pipeline-range", f"{at}: iteration {it} starts past the op's range; the kernel's size "
                     "(range minus offset) wraps around")
            return range(0)
        return range(r.start + lo, r.start + min(lo + unit, len(r)))

    def locs(self, tbs: _Tb, op: Op, b: Buff, size: int, it: int | None, unit: int, at: str, *,
             index: int | None = None, kernel_ptr: bool = True, packet: bool = False,
             local_type: BufferType | None = None, no_offset: bool = False,
             offset_of: BufferType | None = None) -> list[Loc]:
        """The sub-chunks an operand covers; ``index`` overrides the entry's own index (get's swap),
        ``local_type`` its buffer type (a put's sources all come from the first source's buffer),
        ``no_offset`` drops the in-allocation offset (proxies, get's remote read) and ``offset_of``
        adds that of another buffer type (get's local write carries the remote entry's)."""
        g = tbs.gpu
        idx = b.index if index is None else index
        r = self._iter(self._slice(op, idx, size), it, unit, at)
        if isinstance(b, LocalBuff):
            t = local_type or b.type
            space, base = self.place(g.id, t, None if no_offset else g.id, kernel_ptr and not no_offset)
            rank = g.id
        elif isinstance(b, RemoteBuff):
            target = remote_target(self.plan, g, tbs.tb, op.channel_type, b)
            if target is None:
                return []
            rank, t = target
            space, base = self.place(rank, t, None if no_offset else g.id, kernel_ptr)
        else:
            return []
        if offset_of is not None and offset_of is not BufferType.SCRATCH and self.coll is not None \
                and self.coll.inplace:
            base += self.coll.alias(g.id, Buffer(offset_of.value))[1]
        if packet:
            space = "P" + space
        return [(rank, space, base * self.G + s) for s in r]

    def _ready(self, lists: list[list[Loc]]) -> bool:
        """True when every packet carries this launch's flag (a packet read spins until it does)."""
        return all(self.pkt_launch.get(loc) == self.launch for ls in lists for loc in ls)

    # ------------------------------------------------------------------ run
    def _run_launch(self) -> list[_Tb]:
        progress = True
        while progress:
            progress = False
            for t in self.tbs:
                while t.pc < len(t.steps) and self._step(t):
                    t.pc += 1
                    progress = True
        return [t for t in self.tbs if t.pc < len(t.steps)]

    def next_launch(self) -> list[Finding]:
        """Run the plan a second time on the same buffers, after the first launch completed everywhere.

        A GPU's next kernel starts after all its own threadblocks finished (stream order) but with no
        ordering against the other GPUs, so a write of the next launch into a peer that is not ordered
        after the peer's reads of this launch is a race; double buffering flips the scratch half.
        """
        self.launch, self.tag = 1, " in the next launch"
        if self.plan.use_double_scratch_buffer:
            self.half = 1 - self.half
        self.findings, self.counted, self.said = [], {}, set()
        for g in self.plan.gpus:
            # between the launches the application reads this GPU's output and writes its next input
            host = self.actor[(g.id, "host", 0)]
            own = [self.actor[(g.id, tb.id, x)] for tb in g.threadblocks for x in ("C", "D")]
            for a in own:
                self._join(host, self.vc[a], self.cvc[a])
            self._tick(host)
            space, base = self.place(g.id, BufferType.OUTPUT, g.id, True)
            for sub in range(base * self.G, (base + g.output_chunks) * self.G):
                self.read(host, (g.id, space, sub), f"the application reading gpu {g.id}'s output after the call")
            space, base = self.place(g.id, BufferType.INPUT, g.id, True)
            for c in range(g.input_chunks):
                for sub in range((base + c) * self.G, (base + c + 1) * self.G):
                    self.write(host, (g.id, space, sub), ((g.id, c),),
                               f"the application writing gpu {g.id}'s next input after the call")
            for a in own:
                self.vc[a], self.cvc[a] = self.vc[host], self.cvc[host]     # row copies
        for t in self.tbs:
            t.pc = 0
        blocked = self._run_launch()
        if blocked:
            t = blocked[0]
            op, label, _, _ = t.steps[t.pc]
            self.add("deadlock", f"gpu {t.gpu.id} tb {t.tb.id} op {label} ({op.name.value}) never completes in "
                     f"the next launch: {self._blocked_reason(t, op)}")
        return [Finding(_next_code(f.code), f.message, f.severity) for f in self.findings]

    def run(self) -> list[Finding]:
        blocked = self._run_launch()
        if blocked:
            for t in blocked[:MAX_PER_CODE]:
                op, label, _, _ = t.steps[t.pc]
                self.add("deadlock", f"gpu {t.gpu.id} tb {t.tb.id} op {label} ({op.name.value}) never completes: "
                         f"{self._blocked_reason(t, op)}")
            if len(blocked) > MAX_PER_CODE:
                self.findings.append(Finding("deadlock", f"... and {len(blocked) - MAX_PER_CODE} more "
                                             "threadblocks blocked"))
            return self.findings
        self._check_balance()
        self._check_data()
        for code, n in sorted(self.counted.items()):
            if n > MAX_PER_CODE:
                self.findings.append(Finding(code, f"... and {n - MAX_PER_CODE} more {code} findings"))
        return self.findings

    def _blocked_reason(self, t: _Tb, op: Op) -> str:
        g = t.gpu
        if op.name in (OpName.WAIT, OpName.RELAXED_WAIT) and op.channel_type is not None:
            for c in op.channels:
                key = self._chan_key(t, op.channel_type, c)
                if key is None:
                    continue
                got = len(self.signals.get(key, []))
                if got <= self.waited.get(key, 0):
                    peer = g.peers(op.channel_type)[key[2]]
                    return (f"it waits for signal {self.waited.get(key, 0) + 1} on {op.channel_type.value} channel "
                            f"{key[2]} from gpu {peer}, which sends {got}")
        if op.name is OpName.SEM_ACQUIRE:
            return f"semaphore {list(op.semaphore_ids or ())} is never released enough"
        if op.name is OpName.BARRIER:
            return f"barrier {op.barrier_id} never gathers {op.num_threadblocks} threadblocks"
        return "a packet it reads is never written"

    # ------------------------------------------------------------------ one step
    def _chan_key(self, t: _Tb, kind: ChannelType, c: int) -> tuple[int, ChannelType, int] | None:
        ids = t.tb.channel_list(kind)
        if c >= len(ids):
            return None
        return (t.gpu.id, kind, ids[c])

    def _step(self, t: _Tb) -> bool:
        op, label, it, unit = t.steps[t.pc]
        g, tb = t.gpu, t.tb
        at = f"gpu {g.id} tb {tb.id} op {label} ({op.name.value}){self.tag}"
        C, D = self.actor[(g.id, tb.id, "C")], self.actor[(g.id, tb.id, "D")]
        name = op.name
        if name is OpName.NOP:
            self._sync(C, D)
        elif name is OpName.BARRIER:
            return self._barrier(t, op, C, D)
        elif name in (OpName.SIGNAL, OpName.RELAXED_SIGNAL):
            self._signal(t, op, C, relaxed=name is OpName.RELAXED_SIGNAL)
        elif name in (OpName.WAIT, OpName.RELAXED_WAIT):
            return self._wait(t, op, C, relaxed=name is OpName.RELAXED_WAIT)
        elif name is OpName.SEM_RELEASE:
            self._tick(C)
            for s in op.semaphore_ids or ():
                self.sems.setdefault((g.id, s), []).append((self.vc[C].copy(), self.cvc[C].copy()))
                self.sem_count[(g.id, s)] = self._sem(g, s) + 1
        elif name is OpName.SEM_ACQUIRE:
            ids = op.semaphore_ids or ()
            if any(self._sem(g, s) <= 0 for s in ids):
                return False
            for s in ids:
                self.sem_count[(g.id, s)] = self._sem(g, s) - 1
                q = self.sems.get((g.id, s), [])
                if q:
                    vc, cvc = q.pop(0)
                    self._join(C, vc, cvc)
            self._tick(C)
        elif name is OpName.FLUSH:
            for c in op.channels[:len(op.dsts)]:
                key = self._chan_key(t, ChannelType.PORT, c)
                if key is not None:
                    p = self.actor[(g.id, "proxy", key[2])]
                    self._join(C, self.vc[p], self.cvc[p])
        elif name is OpName.MULTI_STORE or name is OpName.PIPELINE:
            pass
        else:
            return self._data(t, op, at, it, unit, C, D)
        return True

    def _sem(self, g: Gpu, s: int) -> int:
        if (g.id, s) not in self.sem_count:
            self.sem_count[(g.id, s)] = g.semaphores[s].init_value if s < len(g.semaphores) else 0
        return self.sem_count[(g.id, s)]

    def _barrier(self, t: _Tb, op: Op, C: int, D: int) -> bool:
        g = t.gpu
        bid, need = op.barrier_id or 0, op.num_threadblocks or 0
        key = (g.id, bid)
        gen, arrived, want = self.barriers.get(key, (0, [], None))
        if t.barrier_gen is None:
            self._sync(C, D)
            if want is not None and want != need:
                self.add("barrier-mismatch", f"gpu {g.id} barrier {bid}: threadblocks arrive expecting {want} and "
                         f"{need} threadblocks")
            arrived = arrived + [(t.tb.id, C)]
            t.barrier_gen = gen
            if len(arrived) >= need:
                rows = [a for _, a in arrived]
                vc, cvc = self.vc[rows].max(axis=0), self.cvc[rows].max(axis=0)
                self.barrier_done[(g.id, bid, gen)] = (vc, cvc)
                self.barriers[key] = (gen + 1, [], None)
            else:
                self.barriers[key] = (gen, arrived, need)
        done = self.barrier_done.get((g.id, bid, t.barrier_gen))
        if done is None:
            return False
        self._join(C, *done)
        self._sync(C, D)
        t.barrier_gen = None
        return True

    def _signal(self, t: _Tb, op: Op, C: int, relaxed: bool) -> None:
        kind = op.channel_type
        if kind not in (ChannelType.MEMORY, ChannelType.PORT):
            return
        self._tick(C)
        for c in op.channels:
            key = self._chan_key(t, kind, c)
            if key is not None:
                self._send_signal(key, C, relaxed)

    def _send_signal(self, key: tuple[int, ChannelType, int], sender: int, relaxed: bool) -> None:
        g, kind, idx = key
        src = sender
        if kind is ChannelType.PORT:
            src = self.actor[(g, "proxy", idx)]
            self._join(src, self.vc[sender], self.cvc[sender])
            self._tick(src)
        other = self.partners.get(key)
        if other is None or other.kind is not kind:
            return       # reported by the rules; nobody can wait for it
        dest = (other.gpu, other.kind, other.index)
        self.signals.setdefault(dest, []).append((self.vc[src].copy(), self.cvc[src].copy(), relaxed))

    def _wait(self, t: _Tb, op: Op, C: int, relaxed: bool) -> bool:
        kind = op.channel_type
        if kind not in (ChannelType.MEMORY, ChannelType.PORT):
            return True
        keys = [k for k in (self._chan_key(t, kind, c) for c in op.channels) if k is not None]
        if any(len(self.signals.get(k, [])) <= self.waited.get(k, 0) for k in keys):
            return False
        for k in keys:
            n = self.waited.get(k, 0)
            vc, cvc, rlx = self.signals[k][n]
            self.waited[k] = n + 1
            self._join(C, vc, cvc, full=not (relaxed or rlx))
        self._tick(C)
        return True

    # ------------------------------------------------------------------ data ops
    def _data(self, t: _Tb, op: Op, at: str, it: int | None, unit: int, C: int, D: int) -> bool:
        g, tb, name = t.gpu, t.tb, op.name
        srcs, dsts = op.srcs, op.dsts
        size0 = srcs[0].size if srcs else 0

        def L(b: Buff, size: int = size0, **kw: object) -> list[Loc]:
            return self.locs(t, op, b, size, it, unit, at, **kw)  # type: ignore[arg-type]

        kind = op.channel_type
        if name in PUTS and kind is ChannelType.PORT:
            for i, d in enumerate(dsts):
                key = self._chan_key(t, kind, op.channels[i]) if i < len(op.channels) else None
                if key is None or i >= len(srcs):
                    continue
                target = remote_target(self.plan, g, tb, kind, d) if isinstance(d, RemoteBuff) else None
                peer = g.peers(kind)[key[2]]
                if target is not None and target[0] != peer:
                    self.add("port-peer", f"{at} puts through a port channel to gpu {peer} into gpu {target[0]}'s "
                             "buffer")
                p = self.actor[(g.id, "proxy", key[2])]
                self._join(p, self.vc[C], self.cvc[C])
                self._tick(p)
                self._move(p, [L(srcs[i], d.size, kernel_ptr=False, no_offset=True)], L(d, d.size, kernel_ptr=False),
                           at)
                if name is not OpName.PUT:
                    self._send_signal(key, p, relaxed=False)
                if name is OpName.PUT_WITH_SIGNAL_AND_FLUSH and self.release.pwsf_flushes:
                    # v0.10 on: the thread that pushed the trigger waits for the proxy's flush of this channel
                    self._join(C, self.vc[p], self.cvc[p])
            self._tick(C)
            return True
        if name in (OpName.PUT_PACKETS, OpName.READ_PUT_PACKETS) and kind is ChannelType.PORT:
            if name is OpName.READ_PUT_PACKETS:
                pk = [L(s, size0, packet=True, local_type=BufferType.SCRATCH) for s in srcs]
                if not self._ready(pk):
                    return False
                self._tick(D)
                for ls in pk:
                    for loc in ls:
                        self.read(D, loc, at, packet=True)
                self._sync(C, D)
            for i, d in enumerate(dsts):
                key = self._chan_key(t, kind, op.channels[i]) if i < len(op.channels) else None
                if key is None or i >= len(srcs):
                    continue
                p = self.actor[(g.id, "proxy", key[2])]
                self._join(p, self.vc[C], self.cvc[C])
                self._tick(p)
                sz = size0 if name is OpName.READ_PUT_PACKETS else srcs[i].size
                # the proxy copies packets as bytes: an unwritten one stays unwritten at the destination
                if name is OpName.READ_PUT_PACKETS:      # from the own scratch, whatever src_buff says
                    src = L(srcs[i], sz, packet=True, local_type=BufferType.SCRATCH)
                else:       # the local buffer by memory id: scratch gets the half, others no offset
                    s_i = srcs[i]
                    src = L(s_i, sz, packet=True,
                            no_offset=not (isinstance(s_i, LocalBuff) and s_i.type is BufferType.SCRATCH))
                dst = L(d, sz, packet=True)
                self._tick(p)
                for s_loc, d_loc in zip(src, dst):
                    v = self.read(p, s_loc, at)
                    if s_loc in self.pkt_launch:
                        self.write(p, d_loc, v, at)
                        self.pkt_launch[d_loc] = self.pkt_launch[s_loc]
            self._tick(C)
            return True
        # everything else runs on all threads of the tb, packet reads wait for their packets
        reads: list[list[Loc]] = []
        packet_reads: list[list[Loc]] = []
        outs: list[list[Loc]] = []
        if name in PUTS:            # memory channel put (pws/pwsf: no signal on memory channels)
            for i, d in enumerate(dsts):
                if i < len(srcs):
                    s0 = srcs[0].type if isinstance(srcs[0], LocalBuff) else None
                    self._tick(D)
                    self._move(D, [L(srcs[i], d.size, local_type=s0)], L(d, d.size, kernel_ptr=False), at)
            return True
        if name is OpName.GET:      # the kernel reads the peer at the *destination's* index, writes at the source's
            for i, s in enumerate(srcs):
                if i < len(dsts):
                    d = dsts[i]
                    self._tick(D)
                    target = remote_target(self.plan, g, tb, kind, s) if isinstance(s, RemoteBuff) else None
                    self._move(D, [L(s, s.size, index=d.index, kernel_ptr=False, no_offset=True)],
                               L(d, s.size, index=s.index, offset_of=target[1] if target else None), at)
            return True
        if name is OpName.COPY:
            reads, outs = [L(srcs[0])], [L(dsts[0])]
        elif name in (OpName.REDUCE, OpName.REDUCE_SEND):
            reads = [L(s) for s in srcs]
            outs = [L(dsts[0])] + ([L(d, kernel_ptr=False) for d in dsts[1:]] if name is OpName.REDUCE_SEND else [])
        elif name in (OpName.READ_REDUCE, OpName.READ_REDUCE_SEND):
            reads = [L(srcs[0])] + [L(s, kernel_ptr=False) for s in srcs[1:]]
            outs = [L(dsts[0])] + ([L(d, kernel_ptr=False) for d in dsts[1:]]
                                   if name is OpName.READ_REDUCE_SEND else [])
        elif name is OpName.PUT_PACKETS:     # memory channel: plain local data -> peer's packets
            s0 = srcs[0].type if isinstance(srcs[0], LocalBuff) else None
            self._tick(D)
            for i, d in enumerate(dsts):
                if i < len(srcs):
                    self._move(D, [L(srcs[i], srcs[i].size, local_type=s0)], L(d, srcs[i].size, packet=True), at)
            return True
        elif name is OpName.READ_PUT_PACKETS:    # memory channel: own scratch packets -> peer's packets
            pk = [L(s, size0, packet=True, local_type=BufferType.SCRATCH) for s in srcs]
            if not self._ready(pk):
                return False
            self._tick(D)
            for i, d in enumerate(dsts):
                if i < len(pk):
                    self._move(D, [pk[i]], L(d, size0, packet=True), at, packet_src=True)
            return True
        elif name in (OpName.REDUCE_SEND_PACKETS, OpName.REDUCE_PACKETS,
                      OpName.REDUCE_COPY_SEND_PACKETS, OpName.REDUCE_COPY_PACKETS):
            reads = [L(srcs[0])]
            packet_reads = [L(s, packet=True, local_type=BufferType.SCRATCH) for s in srcs[1:]]
            outs = [L(dsts[0])]
            rest = dsts[1:]
            if name in (OpName.REDUCE_COPY_SEND_PACKETS, OpName.REDUCE_COPY_PACKETS) and dsts[1:]:
                outs.append(L(dsts[1], packet=True))
                rest = dsts[2:]
            if name in (OpName.REDUCE_SEND_PACKETS, OpName.REDUCE_COPY_SEND_PACKETS):
                outs += [L(d, packet=True) for d in rest]
        elif name is OpName.UNPACK_PACKETS:
            packet_reads = [L(srcs[0], packet=True, local_type=BufferType.SCRATCH)]
            outs = [L(dsts[0])]
        elif name is OpName.COPY_PACKETS:
            reads, outs = [L(srcs[0])], [L(dsts[0], packet=True)]
        elif name is OpName.MULTI_LOAD_REDUCE_STORE:
            reads, outs = self._switch(t, op, it, unit, at)
        else:
            return True
        if not self._ready(packet_reads):
            return False
        self._tick(D)
        self._combine(D, reads, packet_reads, outs, at)
        return True

    def _switch(self, t: _Tb, op: Op, it: int | None, unit: int, at: str) -> tuple[list[list[Loc]], list[list[Loc]]]:
        g = t.gpu
        ids = t.tb.channel_list(ChannelType.SWITCH)
        groups = g.switch_groups()
        sides: list[list[list[Loc]]] = []
        for b in (op.srcs[0], op.dsts[0]):
            assert isinstance(b, SwitchBuff)
            if b.switch_channel_id >= len(ids) or ids[b.switch_channel_id] >= len(groups):
                return [], []
            btype, grp = groups[ids[b.switch_channel_id]]
            r = self._iter(self._slice(op, b.index, op.srcs[0].size), it, unit, at)
            per_rank = []
            for q in grp.ranks:
                space, base = self.place(q, btype, g.id, False)
                per_rank.append([(q, space, base * self.G + s) for s in r])
            sides.append(per_rank)
        return sides[0], sides[1]

    def _move(self, a: int, srcs: list[list[Loc]], dst: list[Loc], at: str, packet_src: bool = False) -> None:
        self._combine(a, [] if packet_src else srcs, srcs if packet_src else [], [dst], at)

    def _combine(self, a: int, reads: list[list[Loc]], packet_reads: list[list[Loc]], outs: list[list[Loc]],
                 at: str) -> None:
        """outs[k][i] = sum over the operands of operand[i], for each output list k."""
        operands = [(ls, False) for ls in reads] + [(ls, True) for ls in packet_reads]
        if not operands:
            return
        # mismatched lengths are reported by the rules (op-sizes); move what every list covers
        n = min([len(ls) for ls, _ in operands] + [len(o) for o in outs])
        values: list[Value] = []
        for i in range(n):
            v: Value = ()
            for ls, pk in operands:
                v = _add(v, self.read(a, ls[i], at, packet=pk))
            values.append(v)
        for o in outs:
            for i in range(n):
                self.write(a, o[i], values[i], at)

    # ------------------------------------------------------------------ end of launch
    def _check_balance(self) -> None:
        for key, sent in sorted(self.signals.items(), key=lambda kv: (kv[0][0], kv[0][1].value, kv[0][2])):
            extra = len(sent) - self.waited.get(key, 0)
            if extra > 0:
                g, kind, idx = key
                peer = self.plan.gpus[g].peers(kind)[idx]
                self.add("unbalanced-signal", f"gpu {g} {kind.value} channel {idx} receives {len(sent)} signals from "
                         f"gpu {peer} but waits {self.waited.get(key, 0)} times: the next launch's waits return "
                         "early")
        for (g, s), n in sorted(self.sem_count.items()):
            init = self.plan.gpus[g].semaphores[s].init_value if s < len(self.plan.gpus[g].semaphores) else 0
            if n != init:
                self.add("semaphore-balance", f"gpu {g} semaphore {s} ends at {n}, not its initial {init}: the next "
                         "launch starts out of step")

    def _mismatches(self, coll: Collective) -> list[str]:
        out = []
        for g in self.plan.gpus:
            for idx, origin, ranks in coll.expected(g.id):
                want = tuple(sorted((q, origin) for q in ranks))
                buf, base = coll.physical(g.id, Buffer.OUTPUT, idx)
                space = buf.value
                bad = [s for s in range(base * self.G, (base + 1) * self.G) if self.mem.get((g.id, space, s)) != want]
                if bad:
                    got = self.mem.get((g.id, space, bad[0]))
                    out.append(f"gpu {g.id} output chunk {idx}: expected {_show(want)}, found "
                               f"{_show(got) if (g.id, space, bad[0]) in self.mem else 'nothing'}"
                               + (f" in {len(bad)} of {self.G} parts" if len(bad) < self.G else ""))
        return out

    def _check_data(self) -> None:
        coll = self.coll
        if coll is None:
            self.findings.append(Finding("no-postcondition", f"collective {self.plan.collective!r}: collc knows no "
                                         "postcondition for it; data not checked", "warning"))
            return
        if not coll.kind.rooted:
            for m in self._mismatches(coll):
                self.add("wrong-data", m)
            return
        # a plan names no root: the root is the rank for which the postcondition holds
        tried = [(self._mismatches(replace(coll, root=r)), r) for r in range(coll.nranks)]
        bad, root = min(tried, key=lambda t: (len(t[0]), t[1]))
        self.root = root
        for m in bad:
            self.add("wrong-data", f"{m} (root {root}, the closest of all roots)")


def _next_code(code: str) -> str:
    """The code of a finding of the second launch: race-* -> race-next-launch; port-source-reuse keeps its name."""
    if code.endswith("next-launch"):
        return code
    if code == "port-source-reuse":
        return "port-source-reuse-next-launch"
    return code.split("-")[0] + "-next-launch"


def _show(v: Value) -> str:
    if v is None:
        return "garbage (uninitialised data)"
    if not v:
        return "no data"
    chunks = sorted({c for _, c in v})
    ranks = [r for r, _ in v]
    dup = sorted({r for r in ranks if ranks.count(r) > 1})
    text = " + ".join(f"in[{r}][{c}]" for r, c in v) if len(v) <= 4 else \
        f"the sum of input chunk{'s' if len(chunks) > 1 else ''} {chunks} over ranks {sorted(set(ranks))}"
    if dup:
        text += f" (ranks {dup} counted twice)"
    return text


def _collective(plan: Plan) -> Collective | None:
    try:
        kind = CollKind(plan.collective)
    except ValueError:
        return None
    if not plan.gpus:
        return None
    g, n = plan.gpus[0], plan.nranks
    c = {CollKind.ALLREDUCE: g.input_chunks, CollKind.ALLGATHER: g.input_chunks,
         CollKind.REDUCESCATTER: g.output_chunks, CollKind.ALLTOALL: g.input_chunks // n,
         CollKind.BROADCAST: g.input_chunks, CollKind.REDUCE: g.input_chunks}[kind]
    if c < 1:
        return None
    # the placement of a rooted collective does not depend on its root: 0 stands in until the data check
    coll = Collective(kind, n, c, plan.inplace, 0 if kind.rooted else None)
    if any((x.input_chunks, x.output_chunks) != (coll.input_chunks, coll.output_chunks) for x in plan.gpus):
        return None
    return coll


def simulate(plan: Plan, release: Release = LATEST) -> list[Finding]:
    """The findings of one simulated launch (deadlock, races, unbalanced signals, wrong or missing data),
    then, if it is clean, the races and hangs of a second launch on the same buffers."""
    sim = Simulator(plan, release)
    found = sim.run()
    if any(f.severity == "error" for f in found):
        return found
    return found + sim.next_launch()
