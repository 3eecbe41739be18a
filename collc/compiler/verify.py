"""Verifier for lowered Programs: what ``collc check`` runs on any MSCCL XML.

Named invariants (each finding carries one of these codes):

``lexical``      the runtime parser's lexical rules (reported by the reader)
``attribute``    required attributes for the dialect, valid values
``limit``        every hard limit of the dialect (steps/tb, tbs/gpu, channels, cnt,
                 depid, offsets, node budget, ``<gpu>`` count)
``structure``    tb ids contiguous, one tb per (peer, chan, direction), peers valid,
                 buffers and offsets in range, ``s`` equal to the position
``dependency``   targets exist and carry ``hasdep="1"``, nops carry a dependency,
                 the parser's chain rule, no own-tb dependency
``match``        send/recv sequences of every (a->b, chan) agree in order and ``cnt``
``deadlock``     the executor simulation cannot finish (blocked steps listed)
``data``         wrong, missing or double-counted chunks in the final buffers
``race``         a step touches a slot another tb writes, with no ordering between them
``order``        (warning) ranks reduce one output chunk in different orders

The simulation follows docs/runtime-model.md: each tb runs its steps
in document order; a dependency waits for the target tb's published flag; each
(sender, receiver, chan) is a FIFO whose capacity in pieces comes from the protocol
and, when ``maxBytes`` bounds the message, from the slicing at that size (1.5).
Data are symbolic (``collc.ir.symbolic``); happens-before for the race check is
program order + flags + messages, never buffer capacity (capacity grows at small
sizes, so an ordering that relies on it is not an ordering).
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from collc.compiler.limits import (LIMITS, LL128_BUFF, LL_BUFF, NCCL_STEPS, REQUIRED_ALGO, SIMPLE_BUFF, Dialect,
                                  parser_nodes)
from collc.compiler.program import (READS_SRC, RECVS, SENDS, WRITES_DST, ParsedFile, Program, Proto, Step, StepType,
                                   Threadblock)
from collc.compiler.scratch import Interval
from collc.compiler.segments import Partition
from collc.errors import ScheduleError
from collc.inputs import INT64_MAX
from collc.ir.collective import Buffer, CollKind, Collective
from collc.ir.symbolic import EXACT_LIMIT, DataError, ExactDomain, NumericExpectation, NumVec, leaf_values

LEGACY_COLLS = {"allreduce", "allgather", "reduce", "broadcast", "alltoall", "reduce_scatter", "custom"}
EXECUTOR_COLLS = {"allreduce", "allgather", "reducescatter", "reduce", "broadcast", "alltoall", "alltoallv",
                  "send", "recv", "gather", "scatter"}
MAX_LISTED = 12
PLAIN_RECV = frozenset({StepType.RECV, StepType.RECV_REDUCE_COPY})


@dataclass(frozen=True)
class Finding:
    code: str
    message: str
    severity: str = "error"

    def to_json(self) -> dict[str, str]:
        return {"code": self.code, "severity": self.severity, "message": self.message}


@dataclass
class Report:
    path: str
    dialect: Dialect
    findings: list[Finding] = field(default_factory=list)
    info: dict[str, object] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not any(f.severity == "error" for f in self.findings)

    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]

    def add(self, code: str, message: str, severity: str = "error") -> None:
        self.findings.append(Finding(code, message, severity))

    def to_json(self) -> dict[str, object]:
        return {"path": self.path, "dialect": self.dialect.value, "ok": self.ok, "info": self.info,
                "findings": [f.to_json() for f in self.findings]}


# =========================================================================== static checks
def _check_header(p: Program, attrs: dict[str, str] | None, missing: Iterable[tuple[str, str]],
                  dialect: Dialect, rep: Report) -> None:
    algo_missing = [a for where, a in missing if where == "<algo>"]
    if attrs is not None:
        algo_missing = [a for a in REQUIRED_ALGO[dialect] if a not in attrs]
    for a in algo_missing:
        hint = " (the executor and RCCL refuse the file: use --dialect legacy for microsoft/msccl files)" \
            if dialect is not Dialect.LEGACY and a in ("minBytes", "maxBytes", "outofplace") else ""
        rep.add("attribute", f'<algo> lacks attribute "{a}"{hint}')
    colls = LEGACY_COLLS if dialect is Dialect.LEGACY else EXECUTOR_COLLS
    if p.coll not in colls:
        other = "reduce_scatter" if p.coll == "reducescatter" else "reducescatter"
        hint = f' (this dialect spells it "{other}")' if p.coll in ("reducescatter", "reduce_scatter") else ""
        rep.add("attribute", f'coll="{p.coll}" is not accepted by the {dialect.value} runtime{hint}')
    lim = LIMITS[dialect]
    if p.ngpus < 1:
        rep.add("attribute", f"ngpus={p.ngpus} must be at least 1")
    if p.nchunksperloop < 1:
        rep.add("attribute", f"nchunksperloop={p.nchunksperloop} must be at least 1")
    if not 1 <= p.nchannels <= lim.max_channels:
        rep.add("limit", f"nchannels={p.nchannels} must be in 1..{lim.max_channels} for {dialect.value}")
    for key, val in (("inplace", p.inplace), ("outofplace", p.outofplace)):
        if val not in (None, 0, 1):
            rep.add("attribute", f"{key}={val} must be 0 or 1")
    if dialect is not Dialect.LEGACY and p.inplace == 0 and p.outofplace == 0:
        rep.add("attribute", "inplace and outofplace are both 0: the runtime never selects this algorithm",
                "warning")
    for key, val in (("minBytes", p.min_bytes), ("maxBytes", p.max_bytes)):
        if val is not None and not 0 <= val <= INT64_MAX:
            rep.add("attribute", f"{key}={val} is outside 0..{INT64_MAX}: the runtime reads it as an int64")
    if p.min_bytes is not None and p.max_bytes and p.min_bytes > p.max_bytes:
        rep.add("attribute", f"minBytes={p.min_bytes} exceeds maxBytes={p.max_bytes}")
    if len(p.name) > 63:
        rep.add("attribute", f"name is {len(p.name)} characters; keep it under 64", "warning")


def _collective_of(p: Program, inplace: bool, root: int | None) -> Collective:
    kind = CollKind.parse(p.coll)
    mult = p.ngpus if kind.size_multiplier_is_n else 1
    if p.nchunksperloop % mult:
        raise ScheduleError(f"nchunksperloop={p.nchunksperloop} is not a multiple of ngpus={p.ngpus}, "
                            f"as {kind.value} needs")
    return Collective(kind, p.ngpus, p.nchunksperloop // mult, inplace, root)


def _check_structure(p: Program, dialect: Dialect, rep: Report, sharded: bool) -> bool:
    """Per-gpu, per-tb and per-step rules; returns False when simulation is unsafe.

    ``sharded``: the program was assembled from per-rank files holding one ``<gpu>`` each.
    """
    lim = LIMITS[dialect]
    fatal = False
    ids = [g.id for g in p.gpus]
    gpus_per_file = 1 if sharded else len(p.gpus)
    if gpus_per_file > lim.max_children:
        rep.add("limit", f"{len(p.gpus)} <gpu> elements in one file: the parser stores at most "
                         f"{lim.max_children} children and overflows memory beyond (use --shard-per-rank)")
    if len(set(ids)) != len(ids):
        rep.add("structure", "a <gpu> id appears twice")
        fatal = True
    missing = sorted(set(range(p.ngpus)) - set(ids))
    if missing:
        rep.add("structure", f"ranks without a <gpu> element: {missing[:MAX_LISTED]} (they would run no tbs)")
        fatal = True
    if any(not 0 <= i < p.ngpus for i in ids):
        rep.add("structure", f"a <gpu> id is outside 0..{p.ngpus - 1}")
        fatal = True
    for g in p.gpus:
        where = f"gpu {g.id}"
        sizes = {"i": g.i_chunks, "o": g.o_chunks, "s": g.s_chunks}
        if min(sizes.values()) < 0:
            rep.add("structure", f"{where}: negative chunk count")
            fatal = True
        tb_ids = sorted(t.id for t in g.tbs)
        if tb_ids != list(range(len(g.tbs))):
            rep.add("structure", f"{where}: tb ids must be unique and contiguous from 0, got {tb_ids[:MAX_LISTED]}")
            fatal = True
        if len(g.tbs) > lim.max_tbs_per_gpu:
            rep.add("limit", f"{where}: {len(g.tbs)} tbs exceed the {dialect.value} limit of "
                             f"{lim.max_tbs_per_gpu} per GPU")
        nodes = parser_nodes(gpus_per_file, len(g.tbs), sum(len(t.steps) for t in g.tbs))
        if nodes > lim.max_nodes_per_rank:
            rep.add("limit", f"{where}: {nodes} parser nodes for this rank (<algo>, {gpus_per_file} <gpu>, its "
                             f"<tb> and <step>); the runtime's parser loads at most {lim.max_nodes_per_rank}")
        send_use: dict[tuple[int, int], int] = {}
        recv_use: dict[tuple[int, int], int] = {}
        per_chan_send: dict[int, set[int]] = {}
        per_chan_recv: dict[int, set[int]] = {}
        by_id = {t.id: t for t in g.tbs}
        for t in g.tbs:
            tw = f"{where} tb {t.id}"
            for role, peer in (("send", t.send), ("recv", t.recv)):
                if peer < -1 or peer == g.id or peer >= p.ngpus:
                    rep.add("structure", f"{tw}: {role} peer {peer} is invalid (must be -1 or another rank "
                                         f"below {p.ngpus})")
                    fatal = True
            if not 0 <= t.chan < max(p.nchannels, 1):
                rep.add("structure", f"{tw}: chan {t.chan} is outside 0..{p.nchannels - 1} (nchannels)")
                fatal = True
            if t.send >= 0:
                key = (t.send, t.chan)
                if key in send_use:
                    rep.add("structure", f"{where}: tbs {send_use[key]} and {t.id} both send to {t.send} on "
                                         f"chan {t.chan}; they would share one connection")
                    fatal = True
                send_use[key] = t.id
                per_chan_send.setdefault(t.chan, set()).add(t.send)
            if t.recv >= 0:
                key = (t.recv, t.chan)
                if key in recv_use:
                    rep.add("structure", f"{where}: tbs {recv_use[key]} and {t.id} both receive from {t.recv} "
                                         f"on chan {t.chan}; they would share one connection")
                    fatal = True
                recv_use[key] = t.id
                per_chan_recv.setdefault(t.chan, set()).add(t.recv)
            if len(t.steps) > lim.max_steps_per_tb:
                rep.add("limit", f"{tw}: {len(t.steps)} steps exceed the {dialect.value} limit of "
                                 f"{lim.max_steps_per_tb} per tb (nops included)")
            fatal |= _check_steps(p, g.id, t, by_id, sizes, lim.max_cnt, lim.max_depid, lim.max_offset, rep)
        for chan, peers in list(per_chan_send.items()) + list(per_chan_recv.items()):
            if len(peers) > lim.max_tbs_per_channel:
                rep.add("limit", f"{where}: chan {chan} has {len(peers)} peers in one direction; the runtime "
                                 f"allows {lim.max_tbs_per_channel} tbs per channel")
    return not fatal


def _check_steps(p: Program, gid: int, t: Threadblock, by_id: dict[int, Threadblock], sizes: dict[str, int],
                 max_cnt: int, max_depid: int, max_offset: int, rep: Report) -> bool:
    fatal = False
    tw = f"gpu {gid} tb {t.id}"
    pending = 0
    for pos, st in enumerate(t.steps):
        sw = _Loc(tw, pos)
        if st.s != pos:
            rep.add("structure", f"{sw}: s=\"{st.s}\" but the step is at position {pos}; the runtime counts "
                                 f"document order, so deps referring to it would be off")
        if st.srcbuf not in sizes or st.dstbuf not in sizes:
            rep.add("structure", f"{sw}: buffers must be i, o or s (got {st.srcbuf}, {st.dstbuf})")
            fatal = True
            continue
        real = st.type is not StepType.NOP
        if real and not 1 <= st.cnt <= max_cnt:
            rep.add("limit", f"{sw}: cnt={st.cnt} must be in 1..{max_cnt}")
            fatal = st.cnt < 1 or fatal
        elif not 0 <= st.cnt <= max_cnt:
            rep.add("limit", f"{sw}: cnt={st.cnt} must be in 0..{max_cnt}")
        if st.type.sends and t.send < 0:
            rep.add("structure", f"{sw}: a {st.type.value} step in a tb with send=-1")
            fatal = True
        if st.type.receives and t.recv < 0:
            rep.add("structure", f"{sw}: a {st.type.value} step in a tb with recv=-1")
            fatal = True
        if real:
            for use, buf, off in (("src", st.srcbuf, st.srcoff), ("dst", st.dstbuf, st.dstoff)):
                used = st.type.reads_src if use == "src" else st.type.writes_dst
                if not used:
                    continue
                if off > max_offset:
                    rep.add("limit", f"{sw}: {use}off={off} exceeds the int16 limit {max_offset}")
                if off < 0 or off + st.cnt > sizes[buf]:
                    rep.add("structure", f"{sw}: {use} {buf}[{off}:{off + st.cnt}] is outside the "
                                         f"{sizes[buf]} chunks of buffer {buf}")
                    fatal = True
        if st.depid >= 0:
            target = by_id.get(st.depid)
            if st.depid > max_depid:
                rep.add("limit", f"{sw}: depid={st.depid} exceeds {max_depid} (stored as int8)")
            if target is None:
                rep.add("dependency", f"{sw}: depends on tb {st.depid}, which does not exist")
                fatal = True
            elif st.depid == t.id:
                rep.add("dependency", f"{sw}: depends on its own tb (program order already holds)", "warning")
            elif not 0 <= st.deps < len(target.steps):
                rep.add("dependency", f"{sw}: depends on step {st.deps} of tb {st.depid}, which has "
                                      f"{len(target.steps)} steps")
                fatal = True
            elif not target.steps[st.deps].hasdep:
                rep.add("dependency", f"{sw}: depends on gpu {gid} tb {st.depid} step {st.deps}, which lacks "
                                      f'hasdep="1": its flag is never published, so the wait hangs or '
                                      f"relies on a later step")
        elif st.depid != -1:
            rep.add("dependency", f"{sw}: depid={st.depid} is invalid")
        if st.hasdep not in (0, 1):
            rep.add("attribute", f"{sw}: hasdep must be 0 or 1, got {st.hasdep}")
        if not real:
            if st.depid < 0:
                rep.add("dependency", f"{sw}: a nop without a dependency is dropped by the parser but still "
                                      f"takes an index, shifting the step counter")
            else:
                pending += 1
        else:
            if pending and st.depid < 0:
                rep.add("dependency", f"{sw}: nops before this step carry dependencies but the step itself "
                                      f"has none; the runtime rejects the file (\"when there is a chain of "
                                      f"dependencies, the last reduction must be a part of the first "
                                      f"immediate instruction\")")
            pending = 0
    return fatal


def _check_input_writes(p: Program, rep: Report) -> None:
    """Out of place, ``i`` is the caller's const send buffer: no step may write it."""
    for g in p.gpus:
        for t in g.tbs:
            for pos, st in enumerate(t.steps):
                if st.type in WRITES_DST and st.dstbuf == "i":
                    rep.add("data", f"gpu {g.id} tb {t.id} step {pos}: {st.type.value} writes i[{st.dstoff}], the "
                                    f"caller's send buffer, in an out-of-place call")
                    return


def _check_matching(p: Program, rep: Report) -> bool:
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


# =========================================================================== size model
@dataclass(frozen=True)
class SizeModel:
    """How the runtime slices at one message size.

    ``mac`` is maxAllowedCount (chunks per piece).  A connection has ``slots`` slots
    (NCCL_STEPS = 8); a piece takes ``piece_slots`` of them: 1 for LL and LL128; for
    Simple 4 (two 2-step slices), or 2 when the piece is no larger than the minimum
    slice (1/32 of a slice, 32 KiB), since NCCL's Simple primitives then send it as one
    slice [ours, from prims_simple].  ``nbytes`` None is the unbounded worst case.
    """

    nbytes: int | None
    mac: int
    slots: int
    chunk_bytes: int | None
    simple: bool

    def piece_slots(self, chunks: int) -> int:
        if not self.simple:
            return 1
        if self.chunk_bytes is not None and chunks * self.chunk_bytes <= SIMPLE_BUFF // NCCL_STEPS * 2 // 32:
            return 2
        return 4

    @property
    def pieces(self) -> int:
        """Pieces of the largest kind a connection holds."""
        return self.slots // self.piece_slots(self.mac)

    def describe(self) -> str:
        size = "any size (maxBytes=0)" if self.nbytes is None else f"{self.nbytes} bytes"
        return f"{size}: {self.mac} chunk(s) per piece, {self.pieces} pieces per connection"


def size_model(proto: Proto, nchunks: int, nbytes: int | None) -> SizeModel:
    simple = proto is Proto.SIMPLE
    if nbytes is None:
        return SizeModel(None, 1, NCCL_STEPS, None, simple)
    if simple:
        eff = SIMPLE_BUFF // NCCL_STEPS * 4
    elif proto is Proto.LL:
        eff = LL_BUFF // NCCL_STEPS // 2
    else:
        eff = LL128_BUFF // NCCL_STEPS // 16 * 15
    chunk = max(1, -(-nbytes // max(nchunks, 1)))
    return SizeModel(nbytes, min(71, max(1, eff // chunk)), NCCL_STEPS, chunk, simple)


def buffering_model(pieces: int) -> SizeModel:
    """A hypothetical runtime whose connections hold ``pieces`` one-chunk pieces."""
    return SizeModel(None, 1, pieces, None, False)


# =========================================================================== simulation
@dataclass
class SimResult:
    finished: bool
    blocked: list[str]
    data_errors: list[str]
    races: list[str]
    order_warnings: list[str]
    pieces: int


@dataclass(frozen=True, slots=True)
class _Loc:
    """"gpu G tb T step S", formatted only when a finding names it."""

    tb: str
    step: int

    def __str__(self) -> str:
        return f"{self.tb} step {self.step}"


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

    __slots__ = ("runs", "avail", "used")

    def __init__(self) -> None:
        self.runs: deque[list[object]] = deque()   # [n, start, payload, tail, snap]
        self.avail = 0                             # pieces held
        self.used = 0                              # slots held

    def push(self, k: int, payload: Any, tail: int, snap: np.ndarray | None,
             model: SizeModel) -> None:
        self.runs.append([k, 0, payload, tail, snap])
        self.avail += k
        self.used += (k - 1) * model.piece_slots(model.mac) + model.piece_slots(tail)

    def pop(self, j: int, model: SizeModel) -> tuple[Any, list[np.ndarray]]:
        run = self.runs[0]
        if run[0] == j and run[1] == 0:     # the common case: exactly one whole run
            self.runs.popleft()
            n, _, payload, tail, snap = run
            assert isinstance(n, int) and isinstance(tail, int)
            self.used -= (n - 1) * model.piece_slots(model.mac) + model.piece_slots(tail)
            self.avail -= j
            return payload, [snap] if isinstance(snap, np.ndarray) else []
        parts: list[Any] = []
        snaps: list[np.ndarray] = []
        full = model.piece_slots(model.mac)
        while j:
            run = self.runs[0]
            n, start, payload, tail, snap = run
            assert isinstance(n, int) and isinstance(start, int) and isinstance(tail, int)
            assert isinstance(payload, (list, NumVec))
            take = min(j, n)
            if take == n:
                parts.append(payload[start:])
                self.used -= (n - 1) * full + model.piece_slots(tail)
                self.runs.popleft()
            else:
                end = start + take * model.mac
                parts.append(payload[start:end])
                self.used -= take * full
                run[0], run[1] = n - take, end
            if isinstance(snap, np.ndarray):
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
    __slots__ = ("gid", "idx", "tb", "pc", "piece", "flag", "publishes", "waiting", "done", "ready",
                 "out", "inn", "rx", "k_in", "k_out", "k_space_in", "k_space_out", "k_flag")

    def __init__(self, gid: int, idx: int, tb: Threadblock) -> None:
        self.gid, self.idx, self.tb = gid, idx, tb
        self.pc = 0
        self.piece = 0
        self.ready = False          # dependencies of the current step are met
        self.flag = -1
        self.publishes: list[tuple[int, np.ndarray | None]] = []
        self.waiting: tuple[str, int, int] = ("", 0, 0)   # why it is blocked, formatted on report
        self.done = not tb.steps
        # set up by simulate(): its connections, their receiver, and its wait-list keys
        self.out: _Conn | None = None
        self.inn: _Conn | None = None
        self.rx: _Tb | None = None
        self.k_in: tuple[object, ...] = ()
        self.k_out: tuple[object, ...] = ()
        self.k_space_in: tuple[object, ...] = ()
        self.k_space_out: tuple[object, ...] = ()
        self.k_flag: tuple[object, ...] = ()


# step-type flags of the simulation loop
_F_RECV, _F_SEND, _F_LOCAL, _F_READ, _F_WRITE, _F_PLAIN, _F_COMBINE = 1, 2, 4, 8, 16, 32, 64


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
             races: bool = True, race_budget: int = 25_000_000, numeric: bool = False, seed: int = 1) -> SimResult:
    """Run the executor model once; data and race tracking are optional (deadlock only is cheap).

    ``numeric``: carry random 64-bit values summed modulo 2^64 instead of symbolic
    contribution sets (for programs too large for the exact check); no reduction-order check.
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
    waiters: dict[tuple[object, ...], list[_Tb]] = {}
    dom = ExactDomain(coll.nranks)
    mem: dict[tuple[int, str], Any] = {}   # list of node ids (exact) or NumVec (numeric)
    data_errors: list[str] = []
    race_list: list[str] = []

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
                for k in range(c):
                    mem[(g.id, pb)][base + k] = dom.leaf(g.id, k)

    # ---- race tracking: vector clocks over tbs that share a slot with another tb
    interesting: dict[int, int] = {}
    if races:
        found = _shared_slot_tbs(p, coll, order, race_budget // max(1, len(order)))
        if found is None:
            race_list.append(f"race check skipped: more than {race_budget // max(1, len(order))} shared-slot tbs "
                             f"x {len(order)} tbs exceeds the exact-check budget of {race_budget} tb-pairs")
        else:
            interesting = found
    k_dim = len(interesting)
    clocks: list[np.ndarray | None] = [np.zeros(k_dim, dtype=np.int32) if k_dim else None for _ in order]
    last_write: dict[tuple[int, str, int], tuple[int, int]] = {}
    reads: dict[tuple[int, str, int], list[tuple[int, int]]] = {}

    def access(tbs_: _Tb, slots: Iterable[tuple[str, int]], write: bool, pos: int) -> None:
        me = interesting.get(tbs_.idx)
        if me is None:
            return
        clk = clocks[tbs_.idx]
        assert clk is not None
        for buf, i in slots:
            key = (tbs_.gid, buf, i)
            prev: list[tuple[int, int, str]] = []
            if key in last_write:
                prev.append((*last_write[key], "writes"))
            if write:
                prev += [(o, s, "reads") for o, s in reads.get(key, [])]
            for other, step, verb in prev:
                if other == tbs_.idx:
                    continue
                oc = interesting.get(other)
                if (oc is None or clk[oc] < step + 1) and len(race_list) < MAX_LISTED:
                    o = order[other]
                    race_list.append(
                        f"gpu {tbs_.gid}: tb {tbs_.tb.id} step {pos} {'writes' if write else 'reads'} "
                        f"{buf}[{i}] with no ordering against tb {o.tb.id} step {step}, which {verb} it")
            if write:
                last_write[key] = (tbs_.idx, pos)
                reads.pop(key, None)
            else:
                reads.setdefault(key, []).append((tbs_.idx, pos))

    def deps_ok(st: _Tb, step: Step) -> bool:
        if step.depid < 0 or step.depid == st.tb.id and step.deps < st.pc:
            return True
        target = tbs.get((st.gid, step.depid))
        if target is None:
            return True
        if target.flag >= step.deps:
            if k_dim:
                snap = next(c for v, c in target.publishes if v >= step.deps)
                clk = clocks[st.idx]
                assert clk is not None and snap is not None
                np.maximum(clk, snap, out=clk)
            return True
        st.waiting = ("dep", step.depid, step.deps)
        waiters.setdefault(target.k_flag, []).append(st)
        return False

    def read(gid: int, buf: str, off: int, n: int, keep: bool = False) -> Any:
        """``keep``: the value outlives this step (it goes into a FIFO), so copy it."""
        pb, base = amap[(gid, buf)]
        row = mem[(gid, pb)]
        if numeric:
            a, b = base + off, base + off + n
            return NumVec(row.v[a:b].copy(), row.ok[a:b].copy()) if keep else NumVec(row.v[a:b], row.ok[a:b])
        return row[base + off:base + off + n]

    def write(gid: int, buf: str, off: int, values: Any) -> None:
        pb, base = amap[(gid, buf)]
        row = mem[(gid, pb)]
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

    def slots(gid: int, buf: str, off: int, n: int) -> list[tuple[str, int]]:
        pb, base = amap[(gid, buf)]
        return [(pb, base + j) for j in range(off, off + n)]

    runnable: deque[_Tb] = deque(order)
    for st in order:
        t = st.tb
        st.k_flag = ("flag", st.gid, t.id)
        if t.send >= 0:
            key = (st.gid, t.send, t.chan)
            st.out = fifo.setdefault(key, _Conn())
            st.k_out, st.k_space_out = ("data",) + key, ("space",) + key
        if t.recv >= 0:
            key = (t.recv, st.gid, t.chan)
            st.inn = fifo.setdefault(key, _Conn())
            st.k_in, st.k_space_in = ("data",) + key, ("space",) + key
    receiver = {(t.tb.recv, t.gid, t.tb.chan): t for t in order if t.tb.recv >= 0}
    for st in order:
        if st.tb.send >= 0:
            st.rx = receiver.get((st.gid, st.tb.send, st.tb.chan))
    flags_of = {t: (_F_RECV if t in RECVS else 0) | (_F_SEND if t in SENDS else 0)
                | (_F_LOCAL if t in (StepType.NOP, StepType.COPY, StepType.REDUCE) else 0)
                | (_F_READ if t in READS_SRC and t is not StepType.REDUCE else 0)
                | (_F_WRITE if t in WRITES_DST else 0) | (_F_PLAIN if t in PLAIN_RECV else 0)
                | (_F_COMBINE if t in (StepType.RECV_REDUCE_SEND, StepType.RECV_REDUCE_COPY,
                                       StepType.RECV_REDUCE_COPY_SEND) else 0)
                for t in StepType}
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
                if not deps_ok(st, step):
                    break
                st.ready = True
            ty = step.type
            fl = flags_of[ty]
            cnt = step.cnt
            n_pieces = 1 if fl & _F_LOCAL else -(-cnt // mac)
            # Process as many pieces as can go without blocking: sequentially the tb would
            # do exactly these, and no other tb acts in between.
            k = n_pieces - st.piece
            if fl & _F_RECV:
                conn_in = st.inn
                assert conn_in is not None
                if conn_in.avail < k:
                    k = conn_in.avail
                    if k == 0:
                        st.waiting = ("recv", 0, 0)
                        waiters.setdefault(st.k_in, []).append(st)
                        break
            if fl & _F_SEND:
                conn_out = st.out
                assert conn_out is not None
                free = nslots - conn_out.used
                fits = free // full
                if fits < k:
                    last = n_pieces - 1
                    if st.piece + fits == last:
                        # only the step's last piece can be smaller than a full one
                        fits += model.piece_slots(cnt - last * mac) <= free - fits * full
                    # Hand-off: a receiver parked on a plain receive of this connection consumes
                    # every piece of its step as it arrives, so the sender may run ahead by that
                    # much (the same end state as the piece-by-piece ping-pong, in one move).
                    rx = st.rx
                    if rx is not None and rx.ready and not rx.done and flags_of[rx.tb.steps[rx.pc].type] & _F_PLAIN:
                        rx_left = -(-rx.tb.steps[rx.pc].cnt // mac) - rx.piece - conn_out.avail
                        if rx_left > fits:
                            fits = rx_left
                    if fits < k:
                        k = fits
                    if k <= 0:
                        st.waiting = ("space", 0, 0)
                        waiters.setdefault(st.k_space_out, []).append(st)
                        break
            lo = st.piece * mac
            hi = cnt if fl & _F_LOCAL else min(cnt, (st.piece + k) * mac)
            n = hi - lo
            payload: Any = []
            if fl & _F_RECV:
                assert conn_in is not None
                payload, snaps = conn_in.pop(k, model)
                if k_dim:
                    clk = clocks[st.idx]
                    assert clk is not None
                    for snap in snaps:
                        np.maximum(clk, snap, out=clk)
                w = waiters.pop(st.k_space_in, None)
                if w:
                    runnable.extend(w)
                if data and len(payload) != n:
                    data_errors.append(f"gpu {st.gid} {_Where(st.tb.id, st.pc, ty)}: received {len(payload)} "
                                       f"chunks, expected {n}")
                    payload = NumVec.concat([payload, NumVec.blank(n)])[:n] if numeric \
                        else (payload + [None] * n)[:n]
            if data:
                tracked = st.idx in interesting
                src: Any = []
                if fl & _F_READ:
                    src = read(st.gid, step.srcbuf, step.srcoff + lo, n, ty is StepType.SEND)
                    if tracked:
                        access(st, slots(st.gid, step.srcbuf, step.srcoff + lo, n), False, st.pc)
                if ty is StepType.SEND or ty is StepType.COPY:
                    payload = src
                elif fl & _F_COMBINE:
                    payload = combine(st.gid, st, ty, src, payload)
                elif ty is StepType.REDUCE:
                    acc = read(st.gid, step.dstbuf, step.dstoff, n)
                    src = read(st.gid, step.srcbuf, step.srcoff, n)
                    if tracked:
                        access(st, slots(st.gid, step.srcbuf, step.srcoff, n), False, st.pc)
                    payload = combine(st.gid, st, ty, acc, src)
                if ty is StepType.COPY and phys(st.gid, step.srcbuf, step.srcoff) == \
                        phys(st.gid, step.dstbuf, step.dstoff):
                    pass  # in place the copy is onto itself (e.g. allgather's input slice): no write
                elif fl & _F_WRITE:
                    write(st.gid, step.dstbuf, step.dstoff + lo, payload)
                    if tracked:
                        access(st, slots(st.gid, step.dstbuf, step.dstoff + lo, n), True, st.pc)
            if fl & _F_SEND:
                assert conn_out is not None
                snap_out = clocks[st.idx].copy() if k_dim else None  # type: ignore[union-attr]
                conn_out.push(k, payload if data else [], n - (k - 1) * mac, snap_out, model)
                w = waiters.pop(st.k_out, None)
                if w:
                    runnable.extend(w)
            total_pieces += k
            st.piece += k
            if st.piece >= n_pieces:
                me = interesting.get(st.idx)
                if me is not None:
                    clk = clocks[st.idx]
                    assert clk is not None
                    clk[me] = st.pc + 1
                if step.hasdep:
                    st.flag = st.pc
                    st.publishes.append((st.pc, clocks[st.idx].copy() if k_dim else None))  # type: ignore[union-attr]
                    w = waiters.pop(st.k_flag, None)
                    if w:
                        runnable.extend(w)
                st.piece = 0
                st.ready = False
                st.pc += 1
                if st.pc >= len(steps):
                    st.done = True
                    # waiters on a finished tb re-check once and then block for good
                    w = waiters.pop(st.k_flag, None)
                    if w:
                        runnable.extend(w)

    blocked = [f"gpu {st.gid} tb {st.tb.id} step {st.pc} ({st.tb.steps[st.pc].type.value}): {_why(st, tbs)}"
               for st in order if not st.done]
    finished = not blocked
    order_warnings: list[str] = []
    if data and finished:
        if numeric:
            _numeric_postcondition(coll, mem, amap, gpus, seed, data_errors)
        else:
            _postcondition(p, coll, dom, mem, phys, gpus, data_errors, order_warnings)
    return SimResult(finished, blocked, data_errors, race_list, order_warnings, total_pieces)


def _numeric_postcondition(coll: Collective, mem: dict[tuple[int, str], Any],
                           amap: dict[tuple[int, str], tuple[str, int]], gpus: Mapping[int, object], seed: int,
                           errors: list[str]) -> None:
    """Compare every output chunk with the expected sum of random inputs (mod 2^64)."""
    expectation = NumericExpectation(coll, seed)
    for r in range(coll.nranks):
        if r not in gpus:
            continue
        outs, want = expectation(r)
        if len(outs) == 0:
            continue
        pb, base = amap[(r, "o")]
        row = mem[(r, pb)]
        idx = outs + base
        got_ok = row.ok[idx]
        bad = np.nonzero(~got_ok | (row.v[idx] != want))[0]
        for k in bad[:MAX_LISTED - len(errors)]:
            what = "uninitialized data" if not got_ok[k] else "a wrong sum (a contribution missing or doubled)"
            errors.append(f"rank {r} output chunk {outs[k]} holds {what} (numeric check)")
        if len(errors) >= MAX_LISTED:
            return


def _shared_slot_tbs(p: Program, coll: Collective, order: list[_Tb], most: int) -> dict[int, int] | None:
    """Tbs that touch a slot which another tb of the same GPU writes: index -> clock component;
    None as soon as there are more than ``most`` (the race check would not fit its budget).

    Slots are tracked per segment (``Partition``): every slot of a segment has the same users.
    """
    amap = {(g.id, b.value): (pb.value, base) for g in p.gpus for b in Buffer for pb, base in [coll.alias(g.id, b)]}
    by_gpu: dict[int, list[_Tb]] = {}
    for st in order:
        by_gpu.setdefault(st.gid, []).append(st)
    chosen: set[int] = set()
    for gid, sts in by_gpu.items():
        ivs: list[tuple[int, Interval, bool]] = []
        for st in sts:
            for step in st.tb.steps:
                if step.cnt <= 0:
                    continue
                t = step.type
                for buf, off, used, w in ((step.srcbuf, step.srcoff, t in READS_SRC, False),
                                          (step.dstbuf, step.dstoff, t in WRITES_DST, True)):
                    if used:
                        pb, base = amap[(gid, buf)]
                        ivs.append((st.idx, (pb, base + off, base + off + step.cnt), w))
        part = Partition(iv for _, iv, _ in ivs)
        user = [-1] * len(part)
        shared = [False] * len(part)
        written = [False] * len(part)
        for idx, iv, w in ivs:
            for g in part.segments(iv):
                u = user[g]
                if u < 0:
                    user[g] = idx
                elif u != idx:
                    shared[g] = True
                if w:
                    written[g] = True
        for idx, iv, _ in ivs:
            if idx not in chosen and any(shared[g] and written[g] for g in part.segments(iv)):
                chosen.add(idx)
        if len(chosen) > most:
            return None
    return {idx: n for n, idx in enumerate(sorted(chosen))}


def _postcondition(p: Program, coll: Collective, dom: ExactDomain, mem: dict[tuple[int, str], list[int | None]],
                   phys: Callable[[int, str, int], tuple[str, int]], gpus: Mapping[int, object],
                   errors: list[str], warnings: list[str]) -> None:
    per_chunk: dict[int, set[int]] = {}
    for r in range(coll.nranks):
        if r not in gpus:
            continue
        for idx, origin, ranks in coll.expected(r):
            want = dom.expect(origin, ranks)
            b, i = phys(r, "o", idx)
            got = mem[(r, b)][i]
            if not dom.matches(got, want):
                if len(errors) < MAX_LISTED:
                    errors.append(f"rank {r} output chunk {idx} holds {dom.describe(got)}, expected "
                                  f"{dom.describe_expect(want)}")
            elif coll.kind.reduces and got is not None:
                per_chunk.setdefault(want.chunk, set()).add(got)
    differing = sorted(k for k, nodes in per_chunk.items() if len(nodes) > 1)
    if differing:
        warnings.append(f"ranks reduce input chunk(s) {differing[:MAX_LISTED]}"
                        f"{' ...' if len(differing) > MAX_LISTED else ''} in different orders: results may "
                        f"differ bitwise between ranks for floating-point data")


# =========================================================================== driver
_ROOT_IN_NAME = re.compile(r"root[=_-]?(\d+)")


def _placements(p: Program, dialect: Dialect) -> list[bool]:
    if dialect is Dialect.LEGACY or p.outofplace is None:
        return [bool(p.inplace)]
    out = []
    if p.inplace:
        out.append(True)
    if p.outofplace:
        out.append(False)
    return out or [False]


def _roots(p: Program, kind: CollKind, root: int | None) -> list[int | None]:
    if not kind.rooted:
        return [None]
    if root is not None:
        return [root]
    m = _ROOT_IN_NAME.search(p.name)
    if m and int(m.group(1)) < p.ngpus:
        return [int(m.group(1))]
    return list(range(p.ngpus))


def check_program(p: Program, dialect: Dialect = Dialect.EXECUTOR, *, path: str = "<program>",
                  parsed: ParsedFile | None = None, root: int | None = None, sharded: bool = False,
                  data_check: str = "auto") -> Report:
    """All static checks plus the executor simulation; returns a Report (never raises on bad programs)."""
    rep = Report(path, dialect)
    if parsed is not None:
        for d in parsed.diagnostics:
            rep.add("lexical" if d.where.startswith("line") else "attribute", str(d), d.kind)
        for where, attr in parsed.missing:
            if where != "<algo>":
                rep.add("attribute", f'{where}: missing required attribute "{attr}"')
    _check_header(p, parsed.attrs if parsed else None, parsed.missing if parsed else (), dialect, rep)
    rep.info.update(ngpus=p.ngpus, coll=p.coll, proto=p.proto.value, nchannels=p.nchannels,
                    nchunksperloop=p.nchunksperloop,
                    max_tbs_per_gpu=max((len(g.tbs) for g in p.gpus), default=0),
                    max_steps_per_tb=max((len(t.steps) for g in p.gpus for t in g.tbs), default=0))
    try:
        kind = CollKind.parse(p.coll)
    except ScheduleError:
        rep.add("attribute", f'coll="{p.coll}" names no collective collc can check')
        return rep
    sim_ok = _check_structure(p, dialect, rep, sharded)
    sim_ok = _check_matching(p, rep) and sim_ok
    if False in _placements(p, dialect):
        _check_input_writes(p, rep)
    if not sim_ok or p.ngpus < 1 or p.nchunksperloop < 1:
        rep.add("deadlock", "simulation skipped: fix the structural errors above first", "warning")
        return rep
    if data_check not in ("auto", "exact", "numeric"):
        raise ValueError(f"data_check must be auto, exact or numeric, not {data_check!r}")
    numeric = data_check == "numeric" or (data_check == "auto" and p.ngpus * p.nchunksperloop > EXACT_LIMIT)
    rep.info["data_check"] = "numeric (random 64-bit values, sums mod 2^64)" if numeric else "exact (symbolic)"
    _simulate_all(p, dialect, kind, root, rep, numeric)
    return rep


def _window_max(p: Program, dialect: Dialect) -> int | None:
    if p.max_bytes:
        return p.max_bytes
    if dialect is Dialect.LEGACY:
        return LIMITS[dialect].legacy_default_max_bytes - 1
    return None


def _simulate_all(p: Program, dialect: Dialect, kind: CollKind, root: int | None, rep: Report,
                  numeric: bool = False) -> None:
    top = _window_max(p, dialect)
    model = size_model(p.proto, p.nchunksperloop, top)
    rep.info["checked_at"] = model.describe()
    for inplace in _placements(p, dialect):
        place = "in-place" if inplace else "out-of-place"
        results: list[tuple[int | None, SimResult]] = []
        for r in _roots(p, kind, root):
            try:
                coll = _collective_of(p, inplace, r)
            except ScheduleError as exc:
                rep.add("attribute", str(exc))
                return
            results.append((r, simulate(p, coll, model, numeric=numeric)))
            if results[-1][1].finished and not results[-1][1].data_errors:
                break
        r, res = results[-1]
        label = place + (f", root {r}" if r is not None else "")
        if len(results) > 1 and r is not None:
            rep.info["root"] = r
        if not res.finished:
            _report_deadlock(p, dialect, kind, inplace, r, model, res, rep, label)
            return
        for e in res.data_errors:
            rep.add("data", f"{label}: {e}")
        for e in res.races:
            sev = "warning" if e.startswith("race check skipped") else "error"
            rep.add("race", f"{label}: {e}", sev)
        for w in res.order_warnings:
            rep.add("order", f"{label}: {w}", "warning")
        rep.info[f"pieces_{'inplace' if inplace else 'outofplace'}"] = res.pieces


def _report_deadlock(p: Program, dialect: Dialect, kind: CollKind, inplace: bool, root: int | None,
                     model: SizeModel, res: SimResult, rep: Report, label: str) -> None:
    coll = _collective_of(p, inplace, root)
    lines = "; ".join(res.blocked[:MAX_LISTED])
    more = f" (+{len(res.blocked) - MAX_LISTED} more)" if len(res.blocked) > MAX_LISTED else ""
    # How much buffering would it need, and from which message size does it hang?
    def completes(pieces: int) -> bool:
        return simulate(p, coll, buffering_model(pieces), data=False, races=False).finished

    need = least = None
    for cap in (4, 8, 16, 32, 64, 128, 256, 1024, 4096):
        if completes(cap):
            need, lo, hi = cap, cap // 2, cap
            while hi - lo > 1:
                mid = (lo + hi) // 2
                lo, hi = (lo, mid) if completes(mid) else (mid, hi)
            least = hi
            break
    msg = f"{label}: deadlock at {model.describe()}; blocked: {lines}{more}"
    if need is not None:
        msg += (f". It completes only with {need} pieces of buffering per connection "
                f"({least} at the least); the runtime gives {model.pieces}")
        threshold = _hang_threshold(p, coll, model)
        if threshold is not None:
            msg += f"; with {p.proto.value} it hangs from {threshold} bytes upwards"
            if dialect is Dialect.LEGACY and not p.max_bytes:
                msg += (f", below the legacy runtime's default maxBytes of "
                        f"{LIMITS[dialect].legacy_default_max_bytes} bytes, so the runtime selects it there")
    else:
        msg += ". It does not complete with any buffering: a dependency or matching cycle"
    rep.add("deadlock", msg)


def _hang_threshold(p: Program, coll: Collective, model: SizeModel) -> int | None:
    """Smallest message size (bytes) at which the runtime's slicing makes it hang."""
    top = model.nbytes if model.nbytes is not None else p.nchunksperloop * (1 << 24)
    cache: dict[tuple[int, int, int], bool] = {}

    def hangs(nbytes: int) -> bool:
        m = size_model(p.proto, p.nchunksperloop, nbytes)
        key = (m.mac, m.piece_slots(1), m.piece_slots(m.mac))
        if key not in cache:
            cache[key] = not simulate(p, coll, m, data=False, races=False).finished
        return cache[key]

    lo = max(1, p.min_bytes or 1)
    if not hangs(top):
        return None
    if hangs(lo):
        return lo
    hi = top
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if hangs(mid):
            hi = mid
        else:
            lo = mid
    return hi


def check_parsed(parsed: ParsedFile, dialect: Dialect, root: int | None = None, sharded: bool = False,
                 data_check: str = "auto") -> Report:
    return check_program(parsed.program, dialect, path=parsed.path, parsed=parsed, root=root, sharded=sharded,
                         data_check=data_check)
