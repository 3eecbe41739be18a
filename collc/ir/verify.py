"""Symbolic execution of a Schedule: postcondition, double reduction, links.

Independent of lowering (DESIGN 4.7): it executes the transfers step by step with
synchronous semantics (all reads of step ``t`` see the state after step ``t-1``)
on the physical buffers of the collective's placement, then compares every
output chunk with the collective's postcondition.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from collc.errors import VerifyError
from collc.ir.collective import Buffer
from collc.ir.schedule import Op, Schedule
from collc.ir.symbolic import DataError, ExactDomain

if TYPE_CHECKING:
    from collc.topology import Topology

Slot = tuple[int, Buffer, int]


def check_links(schedule: Schedule, topology: Topology) -> None:
    """Every remote transfer must use a link, or a route through switches only."""
    if topology.nranks != schedule.collective.nranks:
        raise VerifyError(f"schedule has {schedule.collective.nranks} ranks but topology "
                          f"{topology.name} has {topology.nranks}")
    seen: set[tuple[int, int]] = set()
    for t in schedule.transfers:
        pair = (t.src, t.dst)
        if t.is_local or pair in seen:
            continue
        seen.add(pair)
        if topology.route(t.src, t.dst) is None:
            raise VerifyError(f"step {t.step}: rank {t.src} sends to rank {t.dst}, but {topology.name} "
                              f"has no link or switch route between them")


def verify_schedule(schedule: Schedule, topology: Topology | None = None) -> None:
    """Raise VerifyError naming the first problem; return None when correct."""
    if topology is not None:
        check_links(schedule, topology)
    coll = schedule.collective
    dom = ExactDomain(coll.nranks)
    state: dict[Slot, int] = {}
    for r in range(coll.nranks):
        for k in range(coll.input_chunks):
            buf, idx = coll.physical(r, Buffer.INPUT, k)
            state[(r, buf, idx)] = dom.leaf(r, k)

    def phys(rank: int, buf: Buffer, idx: int) -> Slot:
        b, i = coll.physical(rank, buf, idx)
        return (rank, b, i)

    for step_no, transfers in enumerate(schedule.steps):
        copies: dict[Slot, int | None] = {}
        reduces: dict[Slot, list[int]] = {}
        for t in transfers:
            for s_i, d_i in zip(t.src_idx, t.dst_idx):
                value = state.get(phys(t.src, t.src_buf, s_i))
                dst = phys(t.dst, t.dst_buf, d_i)
                if t.op is Op.COPY:
                    if dst in copies or dst in reduces:
                        raise VerifyError(f"step {step_no}: two transfers write rank {dst[0]} "
                                          f"{dst[1].value}[{dst[2]}] in the same step")
                    copies[dst] = value
                else:
                    if dst in copies:
                        raise VerifyError(f"step {step_no}: rank {dst[0]} {dst[1].value}[{dst[2]}] is "
                                          f"copied and reduced into in the same step")
                    if value is None:
                        raise VerifyError(f"step {step_no}: rank {t.src} sends uninitialized "
                                          f"{t.src_buf.value}[{s_i}] to be reduced on rank {t.dst}")
                    reduces.setdefault(dst, []).append(value)
        for dst, value in copies.items():
            if value is None:
                state.pop(dst, None)
            else:
                state[dst] = value
        for dst, values in reduces.items():
            acc = state.get(dst)
            if acc is None:
                raise VerifyError(f"step {step_no}: rank {dst[0]} reduces into uninitialized "
                                  f"{dst[1].value}[{dst[2]}]")
            try:
                for v in values:
                    acc = dom.reduce(acc, v)
            except DataError as exc:
                raise VerifyError(f"step {step_no}: rank {dst[0]} {dst[1].value}[{dst[2]}] {exc}") from None
            state[dst] = acc

    for r in range(coll.nranks):
        for idx, contributions in sorted(coll.expected(r).items()):
            want = dom.expect(contributions)
            got = state.get(phys(r, Buffer.OUTPUT, idx))
            if not dom.matches(got, want):
                raise VerifyError(f"after {schedule.nsteps} steps rank {r} output chunk {idx} holds "
                                  f"{dom.describe(got)}, expected {dom.describe_expect(want)}")
