"""Paired threadblocks are made only where they cannot block, so a build lowers once
(collc.compiler.msccl.threadblocks, "Safe pairs"; docs/runtime-model.md, "Paired threadblocks")."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collc.check import simulate, size_model
from collc.compiler.buffering import SizeModel, window_top
from collc.compiler.msccl.dependencies import build_program
from collc.compiler.msccl.fusion import fuse
from collc.limits import Dialect
from collc.compiler.pipeline import LowerOptions, lower
from collc.compiler.pipelining import split_chunks
from collc.compiler.msccl.program import Program, Proto
from collc.compiler.scratch import expand
from collc.compiler.transfers import TransferTable
from collc.compiler.msccl.threadblocks import assign_channels, assign_threadblocks, safe_pair
from collc.driver import compile_xml
from collc.errors import LoweringError
from collc.frontends.registry import build_schedule
from collc.ir.collective import Buffer, CollKind, Collective
from collc.ir.schedule import Provenance, Schedule, Transfer
from collc.topology import parse_spec

I, O = Buffer.INPUT, Buffer.OUTPUT

#: A model that holds any send: the rule then admits every pair, as the lowering did before it.
UNBOUNDED = SizeModel(None, 1, 1 << 30, None, False)


def square(k: int) -> Schedule:
    """Two allgathers on one lane of a 2x2 square (ranks ``y*2 + x``), the shape of Swing's
    plain collectives sharing a lane on large tori: X trades its half of the input with the x
    neighbour at step 0 and forwards both blocks to the y neighbour at step 1, Y the other
    way round; every block is ``k`` chunks."""
    coll = Collective(CollKind.ALLGATHER, 4, 2 * k, False)
    out: list[Transfer] = []
    for r in range(4):
        out.append(Transfer(0, r, r, I, range(2 * k), O, range(2 * r * k, 2 * r * k + 2 * k)))
        for half, first, second in ((0, r ^ 1, r ^ 2), (1, r ^ 2, r ^ 1)):     # X, then Y
            own = range(2 * r * k + half * k, 2 * r * k + half * k + k)
            got = range(2 * first * k + half * k, 2 * first * k + half * k + k)
            out.append(Transfer(0, r, first, I, range(half * k, half * k + k), O, own))
            out.append(Transfer(1, r, second, O, own, O, own))
            out.append(Transfer(1, r, second, O, got, O, got))      # forwards what step 0 brought
    return Schedule(coll, tuple(out), Provenance("square"))


def finishes(p: Program, coll: Collective, nbytes: int | None) -> bool:
    return simulate(p, coll, size_model(p.proto, p.nchunksperloop, nbytes), data=False, races=False).finished


def paired(p: Program) -> int:
    return sum(1 for g in p.gpus for t in g.tbs if t.send >= 0 and t.recv >= 0)


@pytest.mark.parametrize("k, safe", [(1, True), (2, False), (8, False)])
def test_square_pairs_only_sends_that_fit_a_connection(k: int, safe: bool) -> None:
    s = square(k)
    plan = expand(TransferTable.of(s))
    chops = assign_channels(plan, 1)
    # rank 0 receives from 2 (its y neighbour) what it forwards to 1 (its x neighbour); it sends
    # k chunks to 1 before its receive of step 0, 2k before that of step 1, and a connection
    # holds 2 one-chunk Simple pieces
    assert safe_pair(chops[0], 2, 1, 0) is safe
    # every pair, as before the rule: blocks exactly when a step-0 send outgrows the connection
    old = build_program(fuse(assign_threadblocks(plan, chops, True, UNBOUNDED)), Proto.SIMPLE, False, "t")
    assert paired(old) == 8
    assert finishes(old, s.collective, None) is safe
    new = lower(s, LowerOptions())
    assert paired(new) == (8 if safe else 0)
    assert finishes(new, s.collective, None)


def test_square_pairs_at_a_size_whose_pieces_fit() -> None:
    # at 1 KiB a chunk and LL, a piece holds many chunks and a connection 8 pieces: safe to pair
    s = square(8)
    p = lower(s, LowerOptions(proto=Proto.LL, max_bytes=s.collective.nchunksperloop * 1024))
    assert paired(p) == 8
    assert finishes(p, s.collective, p.max_bytes)


@dataclass(frozen=True)
class Case:
    algorithm: str
    topology: str
    kind: CollKind


#: Families on tori, hypercubes and rings (ring and multitree pair at these sizes, Swing and
#: recursive halving-doubling with pipelined chunks).
CASES = [Case("swing", "torus:4x4", CollKind.ALLREDUCE), Case("swing", "torus:2x8", CollKind.ALLREDUCE),
         Case("swing", "torus:4x4", CollKind.REDUCESCATTER), Case("swing", "torus:2x2x2", CollKind.ALLGATHER),
         Case("swing", "torus:2x2x4", CollKind.ALLREDUCE),
         Case("multitree", "torus:3x3", CollKind.ALLREDUCE), Case("multitree", "hypercube:3", CollKind.ALLGATHER),
         Case("ring", "ring:8", CollKind.ALLREDUCE), Case("ring", "ring:5", CollKind.ALLGATHER),
         Case("ring", "torus:2x4", CollKind.REDUCESCATTER),
         Case("recursive-halving-doubling", "hypercube:3", CollKind.ALLREDUCE),
         Case("recursive-halving-doubling", "hypercube:4", CollKind.ALLREDUCE),
         Case("recursive-doubling", "hypercube:3", CollKind.ALLREDUCE)]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(case=st.sampled_from(CASES), chunks=st.sampled_from([1, 2, 3, 5]),
       proto=st.sampled_from(list(Proto)), top=st.sampled_from([0, 1 << 16, 1 << 20, 1 << 26]),
       dialect=st.sampled_from([Dialect.EXECUTOR, Dialect.LEGACY]))
def test_paired_lowering_never_blocks(case: Case, chunks: int, proto: Proto, top: int, dialect: Dialect) -> None:
    # LowerOptions pairs by default, also for the families whose builds do not (multitree)
    s = build_schedule(case.algorithm, parse_spec(case.topology), case.kind, False, None, None)
    opts = LowerOptions(chunks=chunks, proto=proto, max_bytes=top, dialect=dialect)
    try:
        p = lower(s, opts)
    except LoweringError:
        return          # a limit (steps or tbs) refuses these chunks: nothing was paired
    coll = split_chunks(TransferTable.of(s), chunks, 1).collective      # the collective the program moves
    # at the window's top (the check's size) and at small sizes, whose pieces are larger
    edge = window_top(dialect, top)
    for nbytes in (edge, 1 << 10, 1 << 14):
        if edge is None or nbytes is None or nbytes <= edge:
            assert finishes(p, coll, nbytes), (case, chunks, proto, top, dialect, nbytes)


@settings(max_examples=30, deadline=None)
@given(k=st.integers(1, 40), proto=st.sampled_from(list(Proto)), top=st.sampled_from([0, 1 << 12, 1 << 16, 1 << 22]))
def test_square_lowering_never_blocks(k: int, proto: Proto, top: int) -> None:
    s = square(k)
    p = lower(s, LowerOptions(proto=proto, max_bytes=top))
    for nbytes in (top or None, 1 << 8, 1 << 12):
        if not top or (nbytes is not None and nbytes <= top):
            assert finishes(p, s.collective, nbytes), (k, proto, top, nbytes)


def test_swing_16x16_pairs_and_never_blocks() -> None:
    # Swing pairs where cap_counts cuts a step's blocks into 64-chunk pieces that the next step
    # forwards whole: from 16x16 up (each collective on its own lane here: 4 lanes)
    s = build_schedule("swing", parse_spec("torus:16x16"), CollKind.ALLREDUCE, True, None, None)
    p = lower(s, LowerOptions())
    assert paired(p) > 0
    assert finishes(p, s.collective, None)


@pytest.mark.parametrize("algorithm, spec, kind, chunks", [
    ("swing", "torus:4x4", CollKind.ALLREDUCE, 1), ("ring", "ring:4", CollKind.ALLGATHER, 3),
    ("ring", "ring:8", CollKind.ALLREDUCE, 5), ("recursive-halving-doubling", "hypercube:4", CollKind.ALLREDUCE, 2),
    ("multitree", "torus:4x4", CollKind.ALLREDUCE, 1)])
def test_compile_xml_lowers_once(algorithm: str, spec: str, kind: CollKind, chunks: int) -> None:
    out = compile_xml(parse_spec(spec), algorithm, kind, chunks=chunks)
    assert out.report.ok
    assert out.lowerings == 1
    assert "pairing" not in out.timings      # no probe and no dropped attempt


def test_partial_shard_build_lowers_once_and_probes_its_pairs() -> None:
    # a node's shards cannot be checked fully: the data-free run over every rank is its check
    out = compile_xml(parse_spec("ring:8"), "ring", CollKind.ALLREDUCE, shard=True, ranks=range(2, 4))
    assert out.report.ok and out.lowerings == 1
    assert sorted(out.shards or {}) == [2, 3]
    assert "pairing" in out.timings


@pytest.mark.slow
def test_swing_16x32_pairs_and_lowers_once() -> None:
    """The smallest torus where the pairing before the rule blocked (docs/runtime-model.md)."""
    out = compile_xml(parse_spec("torus:16x32"), "swing", CollKind.ALLREDUCE)
    assert out.report.ok and out.lowerings == 1 and paired(out.program) > 0
