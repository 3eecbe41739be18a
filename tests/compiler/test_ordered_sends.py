"""The Schedule's ``ordered_sends`` hint through lowering: sends to one peer spread over
channels by the generic channel pass still leave in step order (a dependency between
their threadblocks), so the link is never shared."""

from __future__ import annotations

from collections import Counter

import pytest

from collc.compiler.pipeline import lower
from collc.compiler.msccl.program import SENDS, Program
from collc.ir.collective import Buffer, CollKind, Collective
from collc.ir.schedule import Provenance, Schedule, Transfer
from collc.sim.lockstep import program_rounds


def program(ordered: bool) -> Program:
    """Rank 0 sends 100 chunks to rank 1 one per step: more than a tb holds, so the
    channel pass spreads them by chunk over channels."""
    coll = Collective(CollKind.ALLGATHER, 2, 100, True)
    moves = tuple(Transfer(s, 0, 1, Buffer.OUTPUT, range(s, s + 1), Buffer.OUTPUT, range(s, s + 1))
                  for s in range(100))
    return lower(Schedule(coll, moves, Provenance("test"), ordered_sends=ordered))


@pytest.mark.parametrize("ordered", [False, True])
def test_sends_to_one_peer_keep_their_order_across_channels(ordered: bool) -> None:
    prog = program(ordered)
    senders = [t for t in prog.gpus[0].tbs if t.send == 1]
    assert len(senders) > 1                     # spread over channels
    waits = sum(1 for t in senders for s in t.steps if s.depid >= 0 and prog.gpus[0].tbs[s.depid].send == 1)
    rounds = [r for r in program_rounds(prog) if r]
    if ordered:
        assert waits == 99                      # each send waits for the one before it (other tb)
        assert len(rounds) == 100 and all(len(r) == 1 for r in rounds)
    else:
        assert waits == 0
        assert max(Counter((s, d) for s, d, _ in r)[(0, 1)] for r in rounds) > 1
    assert all(s.type in SENDS or s.type.value == "nop" for t in senders for s in t.steps)
