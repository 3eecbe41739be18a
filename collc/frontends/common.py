"""Small helpers shared by frontends: transfer shorthands and working buffers."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from collc.errors import ScheduleError
from collc.frontends.registry import KEEP_RANKS
from collc.ir.collective import Buffer, Collective
from collc.ir.schedule import Op, Provenance, Schedule, Transfer, make_slots
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
class Builder:
    """Collects transfers; ``step`` offsets let phases be appended one after another."""

    collective: Collective
    transfers: list[Transfer] = field(default_factory=list)
    scratch: int = 0
    tb_pairs: list[tuple[int, int, int, int]] = field(default_factory=list)
    step_sync: tuple[tuple[int, int], ...] = ()
    ordered_sends: bool = False
    step_reply: tuple[tuple[int, int], ...] = ()
    keep: frozenset[int] | None = field(default_factory=KEEP_RANKS.get)

    def move(self, step: int, src: int, dst: int, sbuf: Buffer, sidx: range | list[int] | tuple[int, ...],
             dbuf: Buffer, didx: range | list[int] | tuple[int, ...], reduce: bool = False, lane: int = 0) -> None:
        keep = self.keep
        if keep is not None and src not in keep and dst not in keep:
            return
        self.transfers.append(Transfer(step, src, dst, sbuf, make_slots(sidx), dbuf, make_slots(didx),
                                       Op.REDUCE if reduce else Op.COPY, lane))

    def schedule(self, algorithm: str, params: dict[str, object], topology: str, reference: str) -> Schedule:
        # keys of the registry's own (``@...``) are context, not parameters of the schedule
        prov = Provenance(algorithm, tuple(sorted((k, str(v)) for k, v in params.items() if k[:1] != "@")),
                          topology, reference)
        return Schedule(self.collective, tuple(self.transfers), prov, self.scratch, tuple(self.tb_pairs),
                        self.step_sync, self.ordered_sends, self.step_reply)


def prefix_copy(b: Builder, src: Buffer, dst: Buffer, count: int, ranks: range | list[int]) -> int:
    """Local copies of ``count`` chunks src -> dst on ``ranks`` at step 0; returns the next free step."""
    coll = b.collective
    aliased = coll.inplace and {src, dst} == {I, O} and coll.input_chunks == coll.output_chunks
    if src is dst or aliased:
        return 0
    for r in ranks:
        b.move(0, r, r, src, range(count), dst, range(count))
    return 1
