"""The MultiTree paper's qualitative claims (multitree.md 4.3) in the event model.

Link parameters of the paper: 16 GB/s links and 150 ns per link crossed (hop latency),
no software alpha.  Two claims do not hold in our fluid model and are kept as strict
xfails, so that a model change that makes them hold is noticed.
"""

from __future__ import annotations

from functools import lru_cache

import pytest

from collc.ir.collective import CollKind
from collc.sim.runner import Candidate, Comparison, ModelParams, compare, parse_sizes
from collc.topology import parse_spec

PAPER = ModelParams(model="event", alpha_us=0.0, link_bw=16.0, hop_latency_us=0.15)
SIZES = parse_sizes("32KiB:64MiB")
ALGS = ("multitree", "ring", "ring-2d", "double-binary-tree")


@lru_cache(maxsize=None)
def run(spec: str, algs: tuple[str, ...] = ALGS) -> Comparison:
    return compare(parse_spec(spec), CollKind.ALLREDUCE, [Candidate(a) for a in algs], SIZES, PAPER)


def busbw(spec: str, alg: str) -> list[float]:
    return [r.busbw for r in run(spec).series[alg]]


@pytest.mark.parametrize("spec", ["torus:4x4", "torus:8x8"])
@pytest.mark.parametrize("other", ["ring", "double-binary-tree"])
def test_multitree_beats_ring_and_dbtree_at_every_size(spec: str, other: str) -> None:
    assert all(m > o for m, o in zip(busbw(spec, "multitree"), busbw(spec, other)))


def test_multitree_beats_2d_ring_on_4x4_at_every_size() -> None:
    assert all(m > o for m, o in zip(busbw("torus:4x4", "multitree"), busbw("torus:4x4", "ring-2d")))


def test_multitree_beats_2d_ring_on_8x8_from_64kib() -> None:
    pairs = list(zip(busbw("torus:8x8", "multitree"), busbw("torus:8x8", "ring-2d")))[1:]
    assert all(m > o for m, o in pairs)


@pytest.mark.xfail(strict=True, reason="at 32 KiB on 8x8 the model favours 2D-ring's 28 steps over MultiTree's 34: "
                                       "the paper's packet-level latencies are not modelled")
def test_multitree_beats_2d_ring_on_8x8_at_32kib() -> None:
    assert busbw("torus:8x8", "multitree")[0] > busbw("torus:8x8", "ring-2d")[0]


def test_2d_ring_beats_ring_on_the_8x8_torus() -> None:
    assert all(t > r for t, r in zip(busbw("torus:8x8", "ring-2d"), busbw("torus:8x8", "ring")))


def test_2d_ring_loses_to_ring_on_the_8x8_mesh_at_small_sizes() -> None:
    result = run("mesh:8x8", ("ring", "ring-2d"))
    ring = [r.busbw for r in result.series["ring"]]
    ring2d = [r.busbw for r in result.series["ring-2d"]]
    assert all(t < r for t, r in zip(ring2d[:6], ring[:6]))   # 32 KiB .. 1 MiB


@pytest.mark.xfail(strict=True, reason="above 4 MiB the fluid model lets 2D-ring's doubled mesh links win; the "
                                       "paper (BookSim) reports 2D-ring losing to ring on 8x8 mesh at every size")
def test_2d_ring_loses_to_ring_on_the_8x8_mesh_at_every_size() -> None:
    result = run("mesh:8x8", ("ring", "ring-2d"))
    assert all(t < r for t, r in zip((x.busbw for x in result.series["ring-2d"]),
                                     (x.busbw for x in result.series["ring"])))
