"""``collc check``: every static rule, then the executor simulation, on any Program.

:func:`check_program` runs the rules of :mod:`collc.check.xml.attributes`,
:mod:`collc.check.xml.structure`, :mod:`collc.check.xml.matching` and :mod:`collc.check.data`;
when the program is structurally sound it simulates the executor
(:mod:`collc.check.xml.executor`) once per placement the file allows (and per root of a
rooted collective until one passes), at the largest message size its window selects.
A deadlock is explained: the buffering it would need and the size from which it hangs.
"""

from __future__ import annotations

import re

import numpy as np

from collc.check.xml.attributes import check_header
from collc.check.data import check_input_writes
from collc.check.xml.executor import NeedsSteps, SimResult, simulate
from collc.check.findings import MAX_LISTED, Report
from collc.check.xml.matching import all_match, check_matching
from collc.check.xml.opstream import BUFFERS, TYPES, OpStream
from collc.check.runtime_model import SizeModel, buffering_model, size_model
from collc.check.xml.structure import _WRITES, check_ranks, check_structure
from collc.compiler.buffering import window_top
from collc.limits import LIMITS, Dialect
from collc.compiler.msccl.program import ParsedFile, Program
from collc.errors import ScheduleError
from collc.ir.collective import CollKind, Collective
from collc.ir.symbolic import EXACT_LIMIT


def _collective_of(p: Program, inplace: bool, root: int | None) -> Collective:
    kind = CollKind.parse(p.coll)
    mult = p.ngpus if kind.size_multiplier_is_n else 1
    if p.nchunksperloop % mult:
        raise ScheduleError(f"nchunksperloop={p.nchunksperloop} is not a multiple of ngpus={p.ngpus}, "
                            f"as {kind.value} needs")
    return Collective(kind, p.ngpus, p.nchunksperloop // mult, inplace, root)


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
    check_header(p, parsed.attrs if parsed else None, parsed.missing if parsed else (), dialect, rep)
    rep.info.update(ngpus=p.ngpus, coll=p.coll, proto=p.proto.value, nchannels=p.nchannels,
                    nchunksperloop=p.nchunksperloop,
                    max_tbs_per_gpu=max((len(g.tbs) for g in p.gpus), default=0),
                    max_steps_per_tb=max((len(t.steps) for g in p.gpus for t in g.tbs), default=0))
    try:
        kind = CollKind.parse(p.coll)
    except ScheduleError:
        rep.add("attribute", f'coll="{p.coll}" names no collective collc can check')
        return rep
    ops = OpStream.of(p)
    sim_ok = check_structure(p, dialect, rep, sharded, ops)
    sim_ok = check_matching(p, rep, ops) and sim_ok
    if False in _placements(p, dialect):
        check_input_writes(p, rep)
    if not sim_ok or p.ngpus < 1 or p.nchunksperloop < 1:
        rep.add("deadlock", "simulation skipped: fix the structural errors above first", "warning")
        return rep
    _simulate_checked(p, dialect, kind, root, rep, data_check, ops)
    return rep


def check_columns(p: Program, ops: OpStream, dialect: Dialect, *, path: str, attrs: dict[str, str],
                  root: int | None = None, data_check: str = "auto") -> Report:
    """:func:`check_program` of a shard directory whose files the workers of
    :mod:`collc.backends.shard_check` read and found clean: no reader diagnostic, no finding of the
    per-gpu rules (:func:`check_gpu`, :func:`suspect_tbs`), every header equal.  ``p`` holds
    the gpus and tbs without their steps (``ops`` has those); the report is the one
    :func:`check_program` gives for the files.  Raises :class:`NeedsSteps` where only the
    Step objects can tell what is wrong (a send/receive mismatch, a run the kernel does not
    pass): the caller then reads the directory as objects and runs :func:`check_program`."""
    rep = Report(path, dialect)
    check_header(p, attrs, (), dialect, rep)
    rep.info.update(ngpus=p.ngpus, coll=p.coll, proto=p.proto.value, nchannels=p.nchannels,
                    nchunksperloop=p.nchunksperloop,
                    max_tbs_per_gpu=max((len(g.tbs) for g in p.gpus), default=0),
                    max_steps_per_tb=int(np.diff(ops.tb_start).max(initial=0)))
    try:
        kind = CollKind.parse(p.coll)
    except ScheduleError:
        rep.add("attribute", f'coll="{p.coll}" names no collective collc can check')
        return rep
    sim_ok = not check_ranks(p.ngpus, [g.id for g in p.gpus], 1, dialect, rep)
    if not all_match(p, ops):
        raise NeedsSteps("a send/receive mismatch")
    if False in _placements(p, dialect):
        write = input_write(ops)
        if write is not None:
            rep.add("data", write)
    if not sim_ok or p.ngpus < 1 or p.nchunksperloop < 1:
        rep.add("deadlock", "simulation skipped: fix the structural errors above first", "warning")
        return rep
    _simulate_checked(p, dialect, kind, root, rep, data_check, ops, python=False)
    return rep


def input_write(ops: OpStream) -> str | None:
    """:func:`collc.check.data.check_input_writes` over the op stream: the message for the
    first step (in document order) that writes ``i``, or None."""
    writes = np.flatnonzero(_WRITES[ops.op] & (ops.dstbuf == BUFFERS.index("i")))
    if not len(writes):
        return None
    row = int(writes[0])
    tb = int(ops.tb[row])
    return (f"gpu {int(ops.tb_gpu[tb])} tb {int(ops.tb_id[tb])} step {int(ops.step[row])}: "
            f"{TYPES[int(ops.op[row])].value} writes i[{int(ops.dstoff[row])}], the caller's send buffer, in an "
            f"out-of-place call")


def _simulate_checked(p: Program, dialect: Dialect, kind: CollKind, root: int | None, rep: Report,
                      data_check: str, ops: OpStream, python: bool = True) -> None:
    if data_check not in ("auto", "exact", "numeric"):
        raise ValueError(f"data_check must be auto, exact or numeric, not {data_check!r}")
    numeric = data_check == "numeric" or (data_check == "auto" and p.ngpus * p.nchunksperloop > EXACT_LIMIT)
    rep.info["data_check"] = ("numeric (random 64-bit values, sums mod 2^64)" if numeric else
                              "exact (symbolic; large runs: distinct 64-bit inputs with origin chunks and "
                              "reduction-tree hashes, rerun symbolically on a failure)")
    _simulate_all(p, dialect, kind, root, rep, numeric, ops, python)


def _window_max(p: Program, dialect: Dialect) -> int | None:
    return window_top(dialect, p.max_bytes)


def _simulate_all(p: Program, dialect: Dialect, kind: CollKind, root: int | None, rep: Report,
                  numeric: bool = False, ops: OpStream | None = None, python: bool = True) -> None:
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
            results.append((r, simulate(p, coll, model, numeric=numeric, ops=ops, python=python)))
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
