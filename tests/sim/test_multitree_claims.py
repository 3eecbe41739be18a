"""The MultiTree paper's qualitative claims (multitree.md 4.3) in the event model.

Link parameters of the paper: 16 GB/s links and 150 ns per link crossed (hop latency),
no software alpha.  Wire latency is pipelined (a sender is free once its data is on the
wire), as in the paper's network, and MultiTree lowers to one tb per directed link.  One
claim does not hold in our fluid model (2D-ring losing to ring on the 8x8 mesh) and is
kept as a strict xfail, so that a model change that makes it hold is noticed.
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


@pytest.mark.parametrize("spec", ["torus:4x4", "torus:8x8"])
def test_multitree_beats_2d_ring_at_every_size(spec: str) -> None:
    assert all(m > o for m, o in zip(busbw(spec, "multitree"), busbw(spec, "ring-2d")))


def test_2d_ring_beats_ring_on_the_8x8_torus() -> None:
    assert all(t > r for t, r in zip(busbw("torus:8x8", "ring-2d"), busbw("torus:8x8", "ring")))



@pytest.mark.xfail(strict=True, reason="not reproduced: in the fluid model 2D-ring's 28 dependent steps beat ring's "
                                       "126 at small sizes (6.0 vs 2.8 GB/s at 32 KiB; a 7-hop closing transfer "
                                       "delays each ring phase once, not every step) and at large sizes it moves "
                                       "112 chunk units per link (two messages per mesh link and step) against "
                                       "ring's 126 (16.5 vs 16.0 GB/s at 64 MiB); the paper's loss presumably "
                                       "comes from packet-level effects of BookSim that a fluid model lacks")
def test_2d_ring_loses_to_ring_on_the_8x8_mesh() -> None:
    result = run("mesh:8x8", ("ring", "ring-2d"))
    assert all(t < r for t, r in zip((x.busbw for x in result.series["ring-2d"]),
                                     (x.busbw for x in result.series["ring"])))
