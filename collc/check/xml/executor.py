"""The executor simulation (docs/runtime-model.md section on the simulation).

Each tb runs its steps in document order; a dependency waits for the target tb's published
flag; each (sender, receiver, chan) is a FIFO whose capacity in pieces comes from the
protocol and, when ``maxBytes`` bounds the message, from the slicing at that size
(:mod:`collc.check.runtime_model`).  Data are symbolic (``collc.ir.symbolic``) or, for
large programs, random 64-bit values; happens-before for the race check is program order
+ flags + messages, never buffer capacity (capacity grows at small sizes, so an ordering
that relies on it is not an ordering).
"""

from __future__ import annotations

from bisect import bisect_left
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from collc.check.xml import kernel
from collc.check.data import numeric_postcondition, postcondition
from collc.check.findings import MAX_LISTED
from collc.check.xml.opstream import OpStream
from collc.check.races import shared_slot_tbs
from collc.check.runtime_model import (F_COMBINE, F_LOCAL, F_PLAIN, F_READ, F_RECV, F_SEND, F_WRITE,
                                       FLAGS, SizeModel)
from collc.compiler.msccl.program import Program, Step, StepType, Threadblock
from collc.ir.collective import Buffer, Collective
from collc.ir.symbolic import DataError, ExactDomain, NumVec, leaf_values


# =========================================================================== simulation
_LOW = (1 << 32) - 1    # the step of a packed access (race bookkeeping)
_NO_CLOCK = np.zeros(0, dtype=np.int32)    # the vector clock of every tb when no race is tracked
# What a message or a published flag carries for the race check: the sender's vector clock, its
# component and its progress there (the clock's own component is kept out of the array, so that
# the array is never written after a join made it and a snapshot can share it instead of copying)
_Snap = tuple[np.ndarray, int, int]
# enum members as module constants: ``StepType.SEND`` is a class attribute lookup of ~0.25 us
_SEND, _COPY, _REDUCE = StepType.SEND, StepType.COPY, StepType.REDUCE

@dataclass
class SimResult:
    finished: bool
    blocked: list[str]
    data_errors: list[str]
    races: list[str]
    order_warnings: list[str]
    pieces: int


@dataclass(frozen=True, slots=True)
class _Where:
    """Where a data error happened; formatted only when one is reported."""

    tb: int
    step: int
    type: StepType

    def __str__(self) -> str:
        return f"tb {self.tb} step {self.step} ({self.type.value})"


class _Conn:
    """One (sender, receiver, chan) FIFO holding runs of pieces.

    A run is what one send-type step pushed in one go: ``n`` pieces of ``mac`` chunks,
    the last one possibly shorter (``tail`` chunks).  Keeping runs instead of pieces
    makes the simulation cost proportional to steps, not to pieces.
    """

    __slots__ = ("runs", "avail", "used", "ps", "full", "data_waiters", "space_waiters")

    def __init__(self, ps: list[int]) -> None:
        self.runs: deque[list[Any]] = deque()      # [n, start, payload, tail, snap]
        self.avail = 0                             # pieces held
        self.used = 0                              # slots held
        self.ps = ps                               # slots of a piece of c chunks (c <= mac)
        self.full = ps[-1]                         # slots of a full piece
        self.data_waiters: list[_Tb] = []          # tbs blocked until data arrive
        self.space_waiters: list[_Tb] = []         # tbs blocked until space frees up

    def push(self, k: int, payload: Any, tail: int, snap: _Snap | None,
             model: SizeModel) -> None:
        self.runs.append([k, 0, payload, tail, snap])
        self.avail += k
        self.used += (k - 1) * self.full + self.ps[tail]

    def pop(self, j: int, model: SizeModel) -> tuple[Any, Sequence[_Snap]]:
        run = self.runs[0]
        if run[0] == j and run[1] == 0:     # the common case: exactly one whole run
            self.runs.popleft()
            n, _, payload, tail, snap = run
            self.used -= (n - 1) * self.full + self.ps[tail]
            self.avail -= j
            return payload, () if snap is None else (snap,)
        parts: list[Any] = []
        snaps: list[_Snap] = []
        full = self.full
        while j:
            run = self.runs[0]
            n, start, payload, tail, snap = run
            take = min(j, n)
            if take == n:
                parts.append(payload[start:])
                self.used -= (n - 1) * full + self.ps[tail]
                self.runs.popleft()
            else:
                end = start + take * model.mac
                parts.append(payload[start:end])
                self.used -= take * full
                run[0], run[1] = n - take, end
            if snap is not None:
                snaps.append(snap)
            self.avail -= take
            j -= take
        if parts and isinstance(parts[0], NumVec):
            return NumVec.concat(parts), snaps
        out: list[int | None] = []
        for part in parts:
            out.extend(part)
        return out, snaps


class _Tb:
    __slots__ = ("gid", "idx", "tb", "pc", "piece", "flag", "published", "snapshots", "waiting", "done", "ready",
                 "out", "inn", "rx", "flag_waiters", "rows", "me", "clk", "known")

    def __init__(self, gid: int, idx: int, tb: Threadblock) -> None:
        self.gid, self.idx, self.tb = gid, idx, tb
        self.pc = 0
        self.piece = 0
        self.ready = False          # dependencies of the current step are met
        self.flag = -1
        self.published: list[int] = []             # the steps it published a flag at (race check) ...
        self.snapshots: list[_Snap] = []           # ... and its vector clock at each
        self.waiting: tuple[str, int, int] = ("", 0, 0)   # why it is blocked, formatted on report
        self.done = not tb.steps
        self.flag_waiters: list[_Tb] = []    # tbs blocked until it publishes a flag (or finishes)
        # set up by simulate(): its connections and their receiver
        self.out: _Conn | None = None
        self.inn: _Conn | None = None
        self.rx: _Tb | None = None
        self.rows: dict[str, tuple[Any, int]] = {}   # buffer -> (its physical row, base) with data
        self.me = -1                     # its component of the vector clocks (race check), -1: untracked
        # its vector clock (race check), but for its own component, which is ``pc`` (steps done);
        # never written in place once a snapshot may share it
        self.clk: np.ndarray = _NO_CLOCK
        self.known: list[int] = []       # in a pass without vector clocks: steps known done, by component


def _why(st: _Tb, tbs: Mapping[tuple[int, int], _Tb]) -> str:
    """Why a tb is blocked, in the final state of the simulation."""
    what, a, b = st.waiting
    t = st.tb
    if what == "dep":
        target = tbs.get((st.gid, a))
        return f"waits for tb {a} step {b} (flag {target.flag if target else -1})"
    if what == "recv":
        return f"waits to receive from gpu {t.recv} on chan {t.chan}"
    if what == "space":
        avail = st.out.avail if st.out is not None else 0
        return f"waits for space to send to gpu {t.send} on chan {t.chan} ({avail} pieces in flight)"
    return "blocked"


def simulate(p: Program, coll: Collective, model: SizeModel, data: bool = True,
             races: bool = True, race_budget: int = 25_000_000, numeric: bool = False, seed: int = 1,
             ops: OpStream | None = None, kernel_min_steps: int | None = None, python: bool = True) -> SimResult:
    """Run the executor model once; data and race tracking are optional (deadlock only is cheap).

    ``numeric``: carry random 64-bit values summed modulo 2^64 instead of symbolic
    contribution sets (for programs too large for the exact check); no reduction-order check.
    ``ops``: the program's op stream, if the caller has it already.
    A large run with no race to track goes to the compiled kernel (:mod:`collc.check.xml.kernel`,
    in its exact mode for the exact check; ``kernel_min_steps`` overrides what "large" means,
    ``kernel.worth_it`` decides by default); a run with data that blocks or whose data go
    wrong is repeated here for the messages.
    ``python`` False: raise :class:`NeedsSteps` instead of running the Python model (for a
    program whose tbs hold no Step objects: a shard directory read into columns).
    """
    ntbs = sum(len(g.tbs) for g in p.gpus)
    race_list: list[str] = []
    interesting: dict[int, int] = {}
    if races:
        # race tracking: vector clocks over tbs that share a slot with another tb
        if ops is None:
            ops = OpStream.of(p)
        found = shared_slot_tbs(p, coll, ops, race_budget // max(1, ntbs))
        if found is None:
            race_list.append(f"race check skipped: more than {race_budget // max(1, ntbs)} shared-slot tbs "
                             f"x {ntbs} tbs exceeds the exact-check budget of {race_budget} tb-pairs")
        else:
            interesting = found
    # The exact check may take the kernel too (kernel.run's exact mode: distinct 64-bit inputs,
    # origin chunks, leaf counts, masks and reduction-tree hashes) when it passes; a failure is
    # rerun symbolically below for its messages.
    if not (data and interesting):
        nsteps = len(ops.tb) if ops is not None else sum(len(t.steps) for g in p.gpus for t in g.tbs)
        if kernel_min_steps is None and data and not numeric:     # the exact model's cost (kernel.py)
            chunks = int(ops.count.sum(dtype=np.int64)) if ops is not None else \
                sum(s.cnt for g in p.gpus for t in g.tbs for s in t.steps)
            work = nsteps + chunks // kernel.EXACT_CHUNKS_PER_STEP
        else:
            work = nsteps
        if kernel.worth_it(work) if kernel_min_steps is None else nsteps >= kernel_min_steps:
            lay = kernel.layout(p, ops)
            res = kernel.run(p, coll, model, lay, data, seed, exact=data and not numeric) if lay is not None else None
            if res is not None and not data:
                return SimResult(res.finished, res.blocked, [], race_list, [], res.pieces)
            if res is not None and res.finished and res.data_ok:
                return SimResult(True, [], [], race_list, res.order, res.pieces)
    if not python:
        raise NeedsSteps("the Python model is needed")
    if interesting:       # first without vector clocks (see _run), which mostly suffices
        try:
            return _run(p, coll, model, data, numeric, seed, interesting, list(race_list), clocks=False)
        except _Unordered:
            pass
    return _run(p, coll, model, data, numeric, seed, interesting, race_list, clocks=True)


class NeedsSteps(Exception):
    """``simulate(python=False)`` met a run that only the Python model (over Step objects) decides."""


class _Unordered(Exception):
    """A pass without vector clocks met an access that its direct dependencies do not order."""


def _run(p: Program, coll: Collective, model: SizeModel, data: bool, numeric: bool, seed: int,
         interesting: dict[int, int], race_list: list[str], clocks: bool) -> SimResult:
    """The simulation proper; ``interesting``: the tbs to track for races, by clock component.

    ``clocks`` False is a cheaper first pass for the race check: a tb knows only the steps of
    the tbs it waited on directly (a part of happens-before, with no joins or snapshots); it
    raises _Unordered at the first access that this does not order, which leaves the vector
    clocks to decide it.  When it raises nothing, every access is ordered and the result is
    the one the vector clocks give (data, deadlocks and pieces never depend on the clocks).
    """
    gpus = {g.id: g for g in p.gpus}
    tbs: dict[tuple[int, int], _Tb] = {}
    order: list[_Tb] = []
    for g in p.gpus:
        for t in g.tbs:
            st = _Tb(g.id, len(order), t)
            tbs[(g.id, t.id)] = st
            order.append(st)
    fifo: dict[tuple[int, int, int], _Conn] = {}
    dom = ExactDomain(coll.nranks)
    mem: dict[tuple[int, str], Any] = {}   # list of node ids (exact) or NumVec (numeric)
    data_errors: list[str] = []

    amap = {(g.id, b.value): (pb.value, base) for g in p.gpus for b in Buffer
            for pb, base in [coll.alias(g.id, b)]}

    def phys(gid: int, buf: str, off: int) -> tuple[str, int]:
        pb, base = amap[(gid, buf)]
        return pb, base + off

    if data:
        for g in p.gpus:
            c = coll.input_chunks
            # only the buffers the runtime really allocates: in place, one holds the other
            sizes: dict[str, int] = {}
            for buf, size in (("i", max(g.i_chunks, c)), ("o", max(g.o_chunks, coll.output_chunks)),
                              ("s", g.s_chunks)):
                pb, base = amap[(g.id, buf)]
                sizes[pb] = max(sizes.get(pb, 0), base + size)
            for buf, size in sizes.items():
                mem[(g.id, buf)] = NumVec.blank(size) if numeric else [None] * size
            pb, base = amap[(g.id, "i")]
            if numeric:
                row = mem[(g.id, pb)]
                row.v[base:base + c] = leaf_values(seed, g.id, c)
                row.ok[base:base + c] = True
            else:
                mem[(g.id, pb)][base:base + c] = dom.leaves(g.id, c)

    k_dim = len(interesting)
    for idx, me in interesting.items():
        order[idx].me = me
    vector = bool(k_dim) and clocks    # vector clocks; without them, a tracked tb's direct knowledge
    if vector:
        # the narrowest integer that holds a step count: every join makes a new clock
        longest = max(len(st.tb.steps) for st in order)
        ctype = next(t for t in (np.int8, np.int16, np.int32, np.int64) if longest <= np.iinfo(t).max)
        for st in order:
            st.clk = np.zeros(k_dim, dtype=ctype)
    elif k_dim:
        for st in order:
            if st.me >= 0:
                st.known = [0] * k_dim

    def join(st: _Tb, snap: _Snap) -> None:
        """``st`` learns what ``snap`` knows: a new array, as snapshots may share the old one."""
        clk = np.maximum(st.clk, snap[0])
        c = snap[1]
        if c >= 0 and clk[c] < snap[2]:
            clk[c] = snap[2]
        st.clk = clk

    # Race bookkeeping per physical row of a tracked tb's GPU: the last write of each slot and
    # the reads since then (a tuple, None for none), as packed accesses ``tb index << 32 | step``;
    # each tracked tb's view of them by logical buffer: (physical buffer, base, writes, reads).
    race_rows: dict[tuple[int, str], tuple[list[int], list[tuple[int, ...] | None]]] = {}
    race_view: dict[tuple[int, str], tuple[str, int, list[int], list[tuple[int, ...] | None]]] = {}
    for st in order:
        if st.me >= 0 and data:
            for buf in "ios":
                pb, base = amap[(st.gid, buf)]
                if (st.gid, pb) not in race_rows:
                    size = len(mem[(st.gid, pb)])
                    race_rows[(st.gid, pb)] = ([-1] * size, [None] * size)
                race_view[(st.gid, buf)] = (pb, base, *race_rows[(st.gid, pb)])

    def access(st: _Tb, buf: str, off: int, n: int, write: bool, pos: int) -> None:
        """Record ``st``'s access to ``n`` slots of ``buf`` from ``off``; report the earlier
        accesses of other tbs it has no ordering against."""
        pb, base, lw, rd = race_view[(st.gid, buf)]
        a, b = base + off, base + off + n
        me = st.idx
        clk = st.clk if vector else st.known
        # A step's slots mostly share their reads (one tuple, or None): those are handled as one
        # (tuples are values, so equal ones may as well be the same), the rest slot by slot.
        reads = rd[a:b]
        same = reads.count(reads[0]) == n if n else True
        # Whether anything races: each distinct earlier access once.  Only then, and only while
        # the list has room, are the slots walked one by one for the messages, in slot order.
        earlier = set(lw[a:b])
        if write:
            for r in reads[:1] if same else reads:
                if r:
                    earlier.update(r)
        earlier.discard(-1)
        for e in earlier:
            other = e >> 32
            if other != me:
                oc = order[other].me
                if (oc < 0 or clk[oc] <= e & _LOW) and len(race_list) < MAX_LISTED:
                    if not vector:
                        raise _Unordered
                    report_races(st, pb, a, b, write, pos, lw, rd)
                    break
        mine = me << 32 | pos
        if write:
            lw[a:b] = [mine] * n
            rd[a:b] = [None] * n
        elif same and n:
            r = reads[0]
            rd[a:b] = [(mine,) if r is None else r + (mine,)] * n
        else:
            for j in range(a, b):
                r = rd[j]
                rd[j] = (mine,) if r is None else r + (mine,)

    def report_races(st: _Tb, pb: str, a: int, b: int, write: bool, pos: int, lw: list[int],
                     rd: list[tuple[int, ...] | None]) -> None:
        clk = st.clk
        for i in range(a, b):
            prev = [(lw[i], "writes")] if lw[i] >= 0 else []
            if write:
                prev += [(e, "reads") for e in rd[i] or ()]
            for e, verb in prev:
                other, step = e >> 32, e & _LOW
                if other == st.idx:
                    continue
                oc = order[other].me
                if (oc < 0 or clk[oc] < step + 1) and len(race_list) < MAX_LISTED:
                    race_list.append(
                        f"gpu {st.gid}: tb {st.tb.id} step {pos} {'writes' if write else 'reads'} "
                        f"{pb}[{i}] with no ordering against tb {order[other].tb.id} step {step}, which {verb} it")

    def deps_ok(st: _Tb, step: Step) -> bool:
        if step.depid < 0 or step.depid == st.tb.id and step.deps < st.pc:
            return True
        target = tbs.get((st.gid, step.depid))
        if target is None:
            return True
        if target.flag >= step.deps:
            if k_dim:
                at = bisect_left(target.published, step.deps)
                if vector:
                    join(st, target.snapshots[at])
                elif st.me >= 0 and target.me >= 0 and st.known[target.me] <= target.published[at]:
                    st.known[target.me] = target.published[at] + 1
            return True
        st.waiting = ("dep", step.depid, step.deps)
        target.flag_waiters.append(st)
        return False

    def read(st: _Tb, buf: str, off: int, n: int, keep: bool = False) -> Any:
        """``keep``: the value outlives this step (it goes into a FIFO), so copy it."""
        row, base = st.rows[buf]
        if numeric:
            a, b = base + off, base + off + n
            return NumVec(row.v[a:b].copy(), row.ok[a:b].copy()) if keep else NumVec(row.v[a:b], row.ok[a:b])
        return row[base + off:base + off + n]

    def write(st: _Tb, buf: str, off: int, values: Any) -> None:
        row, base = st.rows[buf]
        if numeric:
            row.v[base + off:base + off + len(values)] = values.v
            row.ok[base + off:base + off + len(values)] = values.ok
        else:
            row[base + off:base + off + len(values)] = values

    def combine(gid: int, st: _Tb, ty: StepType, a: Any, b: Any) -> Any:
        if numeric:
            out_num: NumVec = a.plus(b)
            if not out_num.ok.all() and len(data_errors) < MAX_LISTED:
                data_errors.append(f"gpu {gid} {_Where(st.tb.id, st.pc, ty)}: reduces uninitialized data")
            return out_num
        fast = dom.reduce_all(a, b)
        if fast is not None:
            return fast
        out: list[int | None] = []
        for x, y in zip(a, b):
            if x is None or y is None:
                if len(data_errors) < MAX_LISTED:
                    data_errors.append(f"gpu {gid} {_Where(st.tb.id, st.pc, ty)}: reduces uninitialized data")
                out.append(x if y is None else y)
                continue
            try:
                out.append(dom.reduce(x, y))
            except DataError as exc:
                if len(data_errors) < MAX_LISTED:
                    data_errors.append(f"gpu {gid} {_Where(st.tb.id, st.pc, ty)}: {exc}")
                out.append(x)
        return out

    runnable: deque[_Tb] = deque(order)
    rows_of: dict[int, dict[str, tuple[Any, int]]] = {}   # a GPU's buffers, shared by its tbs
    ps = [model.piece_slots(c) for c in range(model.mac + 1)]
    for st in order:
        t = st.tb
        if data:
            st.rows = rows_of.get(st.gid) or rows_of.setdefault(
                st.gid, {buf: (mem[(st.gid, pb)], base) for buf in "ios" for pb, base in [amap[(st.gid, buf)]]})
        if t.send >= 0:
            key = (st.gid, t.send, t.chan)
            st.out = fifo.get(key) or fifo.setdefault(key, _Conn(ps))
        if t.recv >= 0:
            key = (t.recv, st.gid, t.chan)
            st.inn = fifo.get(key) or fifo.setdefault(key, _Conn(ps))
    receiver = {(t.tb.recv, t.gid, t.tb.chan): t for t in order if t.tb.recv >= 0}
    for st in order:
        if st.tb.send >= 0:
            st.rx = receiver.get((st.gid, st.tb.send, st.tb.chan))
    flags_of = FLAGS
    total_pieces = 0
    mac = model.mac
    full = model.piece_slots(mac)
    nslots = model.slots
    while runnable:
        st = runnable.popleft()
        steps = st.tb.steps
        while not st.done:
            step = steps[st.pc]
            if not st.ready:
                if step.depid >= 0 and not deps_ok(st, step):
                    break
                st.ready = True
            ty = step.type
            fl = flags_of[ty]
            cnt = step.cnt
            n_pieces = 1 if fl & F_LOCAL else -(-cnt // mac)
            # Process as many pieces as can go without blocking: sequentially the tb would
            # do exactly these, and no other tb acts in between.
            k = n_pieces - st.piece
            if fl & F_RECV:
                conn_in = st.inn
                assert conn_in is not None
                if conn_in.avail < k:
                    k = conn_in.avail
                    if k == 0:
                        st.waiting = ("recv", 0, 0)
                        conn_in.data_waiters.append(st)
                        break
            if fl & F_SEND:
                conn_out = st.out
                assert conn_out is not None
                free = nslots - conn_out.used
                fits = free // full
                if fits < k:
                    last = n_pieces - 1
                    if st.piece + fits == last:
                        # only the step's last piece can be smaller than a full one
                        fits += ps[cnt - last * mac] <= free - fits * full
                    # Hand-off: a receiver parked on a plain receive of this connection consumes
                    # every piece of its step as it arrives, so the sender may run ahead by that
                    # much (the same end state as the piece-by-piece ping-pong, in one move).
                    rx = st.rx
                    if rx is not None and rx.ready and not rx.done and flags_of[rx.tb.steps[rx.pc].type] & F_PLAIN:
                        rx_left = -(-rx.tb.steps[rx.pc].cnt // mac) - rx.piece - conn_out.avail
                        if rx_left > fits:
                            fits = rx_left
                    if fits < k:
                        k = fits
                    if k <= 0:
                        st.waiting = ("space", 0, 0)
                        conn_out.space_waiters.append(st)
                        break
            lo = st.piece * mac
            hi = cnt if fl & F_LOCAL else min(cnt, (st.piece + k) * mac)
            n = hi - lo
            payload: Any = []
            if fl & F_RECV:
                assert conn_in is not None
                payload, snaps = conn_in.pop(k, model)
                for snap in snaps:
                    join(st, snap)
                w = conn_in.space_waiters
                if w:
                    runnable.extend(w)
                    w.clear()
                if data and len(payload) != n:
                    data_errors.append(f"gpu {st.gid} {_Where(st.tb.id, st.pc, ty)}: received {len(payload)} "
                                       f"chunks, expected {n}")
                    payload = NumVec.concat([payload, NumVec.blank(n)])[:n] if numeric \
                        else (payload + [None] * n)[:n]
            if data:
                tracked = st.me >= 0
                src: Any = []
                if fl & F_READ:
                    src = read(st, step.srcbuf, step.srcoff + lo, n, ty is _SEND)
                    if tracked:
                        access(st, step.srcbuf, step.srcoff + lo, n, False, st.pc)
                if ty is _SEND or ty is _COPY:
                    payload = src
                elif fl & F_COMBINE:
                    payload = combine(st.gid, st, ty, src, payload)
                elif ty is _REDUCE:
                    acc = read(st, step.dstbuf, step.dstoff, n)
                    src = read(st, step.srcbuf, step.srcoff, n)
                    if tracked:
                        access(st, step.srcbuf, step.srcoff, n, False, st.pc)
                    payload = combine(st.gid, st, ty, acc, src)
                if ty is _COPY and phys(st.gid, step.srcbuf, step.srcoff) == \
                        phys(st.gid, step.dstbuf, step.dstoff):
                    pass  # in place the copy is onto itself (e.g. allgather's input slice): no write
                elif fl & F_WRITE:
                    write(st, step.dstbuf, step.dstoff + lo, payload)
                    if tracked:
                        access(st, step.dstbuf, step.dstoff + lo, n, True, st.pc)
            if fl & F_SEND:
                assert conn_out is not None
                snap_out = (st.clk, st.me, st.pc) if vector else None
                conn_out.push(k, payload if data else [], n - (k - 1) * mac, snap_out, model)
                w = conn_out.data_waiters
                if w:
                    runnable.extend(w)
                    w.clear()
            total_pieces += k
            st.piece += k
            if st.piece >= n_pieces:
                if step.hasdep:
                    st.flag = st.pc
                    if k_dim:
                        st.published.append(st.pc)
                    if vector:
                        st.snapshots.append((st.clk, st.me, st.pc + 1))
                    w = st.flag_waiters
                    if w:
                        runnable.extend(w)
                        w.clear()
                st.piece = 0
                st.ready = False
                st.pc += 1
                if st.pc >= len(steps):
                    st.done = True
                    # waiters on a finished tb re-check once and then block for good
                    w = st.flag_waiters
                    if w:
                        runnable.extend(w)
                        w.clear()

    blocked = [f"gpu {st.gid} tb {st.tb.id} step {st.pc} ({st.tb.steps[st.pc].type.value}): {_why(st, tbs)}"
               for st in order if not st.done]
    finished = not blocked
    order_warnings: list[str] = []
    if data and finished:
        if numeric:
            numeric_postcondition(coll, mem, amap, gpus, seed, data_errors)
        else:
            postcondition(p, coll, dom, mem, phys, gpus, data_errors, order_warnings)
    return SimResult(finished, blocked, data_errors, race_list, order_warnings, total_pieces)
