"""Round recovery of the step model for lowered programs (``collc.sim.lockstep``)."""

from __future__ import annotations

from collections import Counter

import pytest

from collc.driver import compile_xml
from collc.frontends.registry import build_schedule
from collc.ir.collective import CollKind
from collc.sim.lockstep import program_rounds
from collc.topology import parse_spec


@pytest.mark.parametrize("spec, algorithm", [("torus:4x4", "multitree"), ("mesh:4x4", "multitree"),
                                             ("torus:8x8", "multitree"), ("ring:8", "ring"),
                                             ("hypercube:4", "recursive-halving-doubling")])
def test_rounds_are_the_schedules_steps(spec: str, algorithm: str) -> None:
    """A lockstep schedule's steps come back as rounds: as many, and with every connection used
    at most once per round (a tb's sends cannot share a round; before, a MultiTree link tb's
    early-ready sends piled into one: 8 rounds on 4x4 with 4 messages on one link)."""
    topo = parse_spec(spec)
    schedule = build_schedule(algorithm, topo, CollKind.ALLREDUCE, inplace=True)
    rounds = program_rounds(compile_xml(topo, algorithm, CollKind.ALLREDUCE, inplace=True).program)
    remote_steps = {t.step for t in schedule.transfers if not t.is_local}
    assert len(rounds) == len(remote_steps)
    assert all(max(Counter((s, d) for s, d, _ in r).values()) == 1 for r in rounds)


def test_pieces_of_a_transfer_take_consecutive_rounds() -> None:
    """A ring tb sends piece 1 then piece 2 of each step: twice the rounds, each a half chunk per
    link (the bandwidth term is unchanged, alpha is paid per piece)."""
    topo = parse_spec("ring:4")
    one = compile_xml(topo, "ring", CollKind.ALLREDUCE, inplace=True).program
    two = compile_xml(topo, "ring", CollKind.ALLREDUCE, inplace=True, chunks=2).program
    whole, pieces = program_rounds(one), program_rounds(two)
    assert [len(r) for r in whole] == [4] * 6 and [len(r) for r in pieces] == [4] * 12
    assert two.nchunksperloop == 2 * one.nchunksperloop          # messages of one chunk: half the bytes
    assert {c for r in whole + pieces for _, _, c in r} == {1}
