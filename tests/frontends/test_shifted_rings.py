"""ShiftedRing / ShiftedBFBRing baselines and the paper's N = 12 comparison (section 8.3, Fig. 6)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from collc.limits import Dialect
from collc.driver import compile_xml
from collc.errors import ScheduleError
from collc.frontends.bfb import schedule_cost
from collc.frontends.registry import build_schedule
from collc.ir.collective import CollKind
from collc.sim.runner import ModelParams
from collc.tuning import Candidate, compare
from collc.topology import parse_spec

SHIFTED = "circulant:12:1,5"


@pytest.mark.parametrize("kind", [CollKind.ALLGATHER, CollKind.REDUCESCATTER, CollKind.ALLREDUCE])
@pytest.mark.parametrize("name, steps", [("shifted-ring", 11), ("shifted-bfb-ring", 6)])
def test_shifted_rings_are_bandwidth_optimal(name: str, steps: int, kind: CollKind) -> None:
    topo = parse_spec(SHIFTED)
    phases = 2 if kind is CollKind.ALLREDUCE else 1
    for dialect, inplace in ((Dialect.EXECUTOR, False), (Dialect.RCCL, True)):
        c = compile_xml(topo, name, kind, inplace=inplace, dialect=dialect)
        assert c.report.ok
        assert schedule_cost(c.schedule, topo) == (phases * steps, phases * Fraction(11, 12))


def test_allreduce_steps_at_n12_ours_4_shifted_bfb_12_shifted_22() -> None:
    ours = parse_spec("find:12:4:1,bi")
    assert schedule_cost(build_schedule("bfb", ours, CollKind.ALLREDUCE, True), ours)[0] == 4
    topo = parse_spec(SHIFTED)
    assert schedule_cost(build_schedule("shifted-bfb-ring", topo, CollKind.ALLREDUCE, True), topo)[0] == 12
    assert schedule_cost(build_schedule("shifted-ring", topo, CollKind.ALLREDUCE, True), topo)[0] == 22


def test_shifted_rings_need_two_hamiltonian_generators() -> None:
    with pytest.raises(ScheduleError, match="coprime"):
        build_schedule("shifted-ring", parse_spec("circulant:12:2,3"), CollKind.ALLREDUCE)
    with pytest.raises(ScheduleError, match="circulant"):
        build_schedule("shifted-bfb-ring", parse_spec("ring:12"), CollKind.ALLREDUCE)


def test_compare_at_n12_shows_the_papers_ordering() -> None:
    # each on its own fabric with the same node bandwidth (4 links of 1 GB/s; the tree on a switch at 4 GB/s)
    cands = [Candidate("bfb"), Candidate("shifted-ring", topology=SHIFTED),
             Candidate("shifted-bfb-ring", topology=SHIFTED), Candidate("double-binary-tree", topology="switch:12:bw=4")]
    res = compare(parse_spec("circulant:12:2,3"), CollKind.ALLREDUCE, cands, [1 << 10, 1 << 20, 1 << 30],
                  ModelParams())
    bw = {lab: [r.busbw for r in rows] for lab, rows in res.series.items()}
    ours, ring, bfbring, dbt = (bw[c.label] for c in cands)
    assert ours[0] > max(ring[0], bfbring[0], dbt[0])          # 1 KiB: fewest steps wins
    assert ours[1] > max(ring[1], bfbring[1], dbt[1])          # 1 MiB: beats every baseline
    # 1 GiB: ties the rings and beats the tree.  The tree's margin was 3.5x (1.13 GB/s) while the
    # event model sent a step's chunk as one message; the executor runs the program once per
    # 2 MiB slice, so the tree pipelines down its levels (3.63 GB/s against 3.99)
    assert ours[2] == pytest.approx(ring[2], rel=0.01) and ours[2] > 1.05 * dbt[2]
    assert ring[0] < bfbring[0]                                 # BFB halves the ring's steps
