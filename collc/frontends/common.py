"""Small helpers shared by frontends: transfer shorthands and working buffers.

:class:`Builder` collects ``Transfer`` values; :class:`ColumnBuilder` collects the same
transfers as int64 columns (:meth:`collc.ir.schedule.Schedule.of_columns`), for the frontends
that make a million of them (MultiTree and BFB at 1024 ranks): numpy places, sorts and
checks them, and the lowering reads the columns instead of every ``Transfer``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from collc.errors import ScheduleError
from collc.frontends.registry import KEEP_RANKS
from collc.ir.collective import Buffer, Collective
from collc.ir.schedule import BUFFER_CODE, COLUMNS, Op, Provenance, Schedule, Transfer, make_slots
from collc.topology import Topology

I, O, S = Buffer.INPUT, Buffer.OUTPUT, Buffer.SCRATCH


def is_pow2(n: int) -> bool:
    return n >= 1 and n & (n - 1) == 0


def require_pow2(n: int, name: str) -> int:
    if not is_pow2(n) or n < 2:
        raise ScheduleError(f"{name} needs a power-of-two number of ranks (at least 2), got {n}")
    return n.bit_length() - 1


def refusal_of(check: Callable[[], object]) -> str | None:
    """The message of the ScheduleError that a validating function raises (None if it returns):
    one validator serves both ``applies`` and the build."""
    try:
        check()
    except ScheduleError as exc:
        return str(exc)
    return None


def pow2_refusal(n: int, name: str) -> str | None:
    """The refusal of an algorithm that needs a power-of-two number of ranks (None if n is one)."""
    return None if is_pow2(n) and n >= 2 else f"{name} needs a power-of-two number of ranks (at least 2), got {n}"


def route_refusal(topology: Topology, pairs: Iterable[tuple[int, int]], name: str, what: str) -> str | None:
    """The refusal of a topology-oblivious algorithm when some rank pair it sends over
    (``what`` names them) has no link or switch route; None on a routed network
    (torus, mesh) or when every pair has one."""
    if topology.is_routed():
        return None
    for a, b in pairs:
        if topology.route(a, b) is None:
            return (f"{name} sends between {what}, but {topology.name} has no link or switch route from rank "
                    f"{a} to rank {b}")
    return None


@dataclass
class _ScheduleOptions:
    """What a builder hands the Schedule besides its transfers (both builders take these)."""

    collective: Collective
    scratch: int = 0
    tb_pairs: list[tuple[int, int, int, int]] = field(default_factory=list)
    step_sync: tuple[tuple[int, int], ...] = ()
    ordered_sends: bool = False
    step_reply: tuple[tuple[int, int], ...] = ()
    keep: frozenset[int] | None = field(default_factory=KEEP_RANKS.get)


@dataclass
class Builder(_ScheduleOptions):
    """Collects transfers; ``step`` offsets let phases be appended one after another."""

    transfers: list[Transfer] = field(default_factory=list)

    def move(self, step: int, src: int, dst: int, sbuf: Buffer, sidx: range | list[int] | tuple[int, ...],
             dbuf: Buffer, didx: range | list[int] | tuple[int, ...], reduce: bool = False, lane: int = 0) -> None:
        keep = self.keep
        if keep is not None and src not in keep and dst not in keep:
            return
        self.transfers.append(Transfer(step, src, dst, sbuf, make_slots(sidx), dbuf, make_slots(didx),
                                       Op.REDUCE if reduce else Op.COPY, lane))

    def schedule(self, algorithm: str, params: dict[str, object], topology: str, reference: str) -> Schedule:
        return Schedule(self.collective, tuple(self.transfers), provenance(algorithm, params, topology, reference),
                        self.scratch, tuple(self.tb_pairs), self.step_sync, self.ordered_sends, self.step_reply)


def provenance(algorithm: str, params: dict[str, object], topology: str, reference: str) -> Provenance:
    # keys of the registry's own (``@...``) are context, not parameters of the schedule
    return Provenance(algorithm, tuple(sorted((k, str(v)) for k, v in params.items() if k[:1] != "@")),
                      topology, reference)


Ints = npt.NDArray[np.int64]
Column = Ints | int
_CODE = BUFFER_CODE


def code(buf: Buffer) -> int:
    """``buf``'s code in a Schedule's columns."""
    return _CODE[buf]


@dataclass
class ColumnBuilder(_ScheduleOptions):
    """:class:`Builder`'s transfers as columns (rows of :data:`collc.ir.schedule.COLUMNS`), in the
    order they were added: ``move`` adds one (chunk lists are ranges), ``moves`` a block of
    arrays (scalars broadcast).  :meth:`columns` gives them, kept ranks only (``keep``, as
    ``Builder.move`` filters), for a frontend to set lanes on; :meth:`schedule` makes the Schedule.
    """

    _blocks: list[Ints] = field(default_factory=list)
    _rows: list[tuple[int, ...]] = field(default_factory=list)     # single moves not yet in a block

    def move(self, step: int, src: int, dst: int, sbuf: Buffer, sidx: range, dbuf: Buffer, didx: range,
             reduce: bool = False, lane: int = 0) -> None:
        if len(sidx) != len(didx) or sidx.step != 1 or didx.step != 1:
            raise ScheduleError(f"transfer needs equal, ascending contiguous chunk lists: {sidx} -> {didx}")
        self._rows.append((step, src, dst, _CODE[sbuf], _CODE[dbuf], int(reduce), lane, len(sidx), sidx.start,
                           didx.start))

    def moves(self, step: Column, src: Column, dst: Column, sbuf: Buffer | Ints, sfirst: Column, dbuf: Buffer | Ints,
              dfirst: Column, cnt: Column = 1, reduce: bool = False, lane: Column = 0) -> None:
        """One transfer per entry of the arrays: ``cnt`` chunks from ``sfirst`` to ``dfirst``; a
        buffer is one for all, or an array of :func:`code` values."""
        self._flush()
        sb = _CODE[sbuf] if isinstance(sbuf, Buffer) else sbuf
        db = _CODE[dbuf] if isinstance(dbuf, Buffer) else dbuf
        parts = np.broadcast_arrays(*(np.asarray(x, dtype=np.int64) for x in (
            step, src, dst, sb, db, int(reduce), lane, cnt, sfirst, dfirst)))
        self._blocks.append(np.stack(parts).reshape(10, -1))

    def _flush(self) -> None:
        if self._rows:
            self._blocks.append(np.array(self._rows, dtype=np.int64).reshape(-1, 10).T)
            self._rows = []

    def columns(self) -> Ints:
        """The transfers so far, ``len(COLUMNS)`` rows, in the order they were added (kept as one block)."""
        self._flush()
        blocks, self._blocks = self._blocks, []
        total = sum(b.shape[1] for b in blocks)
        cols: Ints = np.full((len(COLUMNS), total), -1, dtype=np.int64)
        at = 0
        while blocks:               # each block freed once copied (a million rows on 32x32)
            b = blocks.pop(0)
            cols[:10, at:at + b.shape[1]] = b
            at += b.shape[1]
        if self.keep is not None:
            kept = np.fromiter(self.keep, dtype=np.int64, count=len(self.keep))
            cols = cols[:, np.isin(cols[1], kept) | np.isin(cols[2], kept)]
        self._blocks = [cols[:10]]
        return cols

    def schedule(self, algorithm: str, params: dict[str, object], topology: str, reference: str) -> Schedule:
        """The Schedule of the transfers (the builder is empty after)."""
        self._flush()
        return Schedule.of_columns(self.collective, self._take(), provenance(algorithm, params, topology, reference),
                                   self.scratch, tuple(self.tb_pairs), self.step_sync, self.ordered_sends,
                                   self.step_reply)

    def set_lanes(self, lanes: Ints) -> None:
        """Give the transfers so far these lanes (one per row of :meth:`columns`)."""
        cols = self.columns()
        cols[6] = lanes

    def _take(self) -> Ints:
        cols = self.columns()
        self._blocks = []
        return cols


def prefix_copy(b: Builder | ColumnBuilder, src: Buffer, dst: Buffer, count: int, ranks: range | list[int]) -> int:
    """Local copies of ``count`` chunks src -> dst on ``ranks`` at step 0; returns the next free step."""
    coll = b.collective
    aliased = coll.inplace and {src, dst} == {I, O} and coll.input_chunks == coll.output_chunks
    if src is dst or aliased:
        return 0
    for r in ranks:
        b.move(0, r, r, src, range(count), dst, range(count))
    return 1
