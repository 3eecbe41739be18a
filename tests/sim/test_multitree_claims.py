"""The MultiTree paper's qualitative claims (multitree.md 4.3) in both timing models.

Link parameters of the paper: 16 GB/s links and 150 ns per link crossed (hop latency),
no software alpha; MultiTree lowers to one tb per directed link.

* Event model (data-driven, wire latency pipelined): MultiTree beats ring, 2D-ring and
  the double binary tree at every size on 4x4 and 8x8 tori, 2D-ring beats ring on the
  8x8 torus and on the 4x4 mesh; it does *not* lose to ring on the 8x8 mesh (strict
  xfail: a 7-hop closing transfer delays a data-driven ring phase once, not every step).
* Step model (lockstep rounds recovered from the program: the paper's network interface
  keeps its steps in lockstep, and its explanation of the mesh result, "the latency is
  determined by the slowest pair", is a lockstep one): every claim of the issue holds,
  the 8x8-mesh loss included; but there 2D-ring also (narrowly) loses on the 4x4 mesh,
  where the paper has it win (strict xfail).  The paper's crossover between the two
  meshes lies between the models.
"""

from __future__ import annotations

from functools import lru_cache

import pytest

from collc.ir.collective import CollKind
from collc.sim.runner import ModelParams, parse_sizes
from collc.tuning import Candidate, Comparison, compare
from collc.topology import parse_spec

PAPER = ModelParams(model="event", alpha_us=0.0, link_bw=16.0, hop_latency_us=0.15)
LOCKSTEP = ModelParams(model="step", alpha_us=0.0, link_bw=16.0, hop_latency_us=0.15)
SIZES = parse_sizes("32KiB:64MiB")
ALGS = ("multitree", "ring", "ring-2d", "double-binary-tree")


@lru_cache(maxsize=None)
def run(spec: str, algs: tuple[str, ...] = ALGS, params: ModelParams = PAPER) -> Comparison:
    return compare(parse_spec(spec), CollKind.ALLREDUCE, [Candidate(a) for a in algs], SIZES, params)


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



@pytest.mark.xfail(strict=True, reason="docs/multitree.md, Errata M1; not reproduced: in the fluid model 2D-ring's 28 dependent steps beat ring's "
                                       "126 at small sizes (6.0 vs 2.8 GB/s at 32 KiB; a 7-hop closing transfer "
                                       "delays each ring phase once, not every step) and at large sizes it moves "
                                       "112 chunk units per link (two messages per mesh link and step) against "
                                       "ring's 126 (16.5 vs 16.0 GB/s at 64 MiB); the paper's loss presumably "
                                       "comes from packet-level effects of BookSim that a fluid model lacks")
def test_2d_ring_loses_to_ring_on_the_8x8_mesh() -> None:
    result = run("mesh:8x8", ("ring", "ring-2d"))
    assert all(t < r for t, r in zip((x.busbw for x in result.series["ring-2d"]),
                                     (x.busbw for x in result.series["ring"])))


def test_2d_ring_beats_ring_on_the_4x4_mesh() -> None:
    result = run("mesh:4x4", ("ring", "ring-2d"))
    assert all(t > r for t, r in zip((x.busbw for x in result.series["ring-2d"]),
                                     (x.busbw for x in result.series["ring"])))


# ---------------------------------------------------------------------- lockstep (step) model
def lockstep(spec: str, alg: str) -> list[float]:
    return [r.busbw for r in run(spec, ALGS, LOCKSTEP).series[alg]]


@pytest.mark.parametrize("spec", ["torus:4x4", "torus:8x8"])
def test_lockstep_multitree_beats_every_baseline_at_every_size(spec: str) -> None:
    mt = lockstep(spec, "multitree")
    for other in ("ring", "ring-2d", "double-binary-tree"):
        assert all(m > o for m, o in zip(mt, lockstep(spec, other))), other


def test_lockstep_2d_ring_beats_ring_on_the_8x8_torus() -> None:
    assert all(t > r for t, r in zip(lockstep("torus:8x8", "ring-2d"), lockstep("torus:8x8", "ring")))


def test_lockstep_2d_ring_loses_to_ring_on_the_8x8_mesh() -> None:
    """The paper's reason: with steps in lockstep every round waits for the two farthest nodes
    of a line (the 7-hop closing transfer) and the mesh links carry two messages per round
    (more where a phase's first sends meet the previous phase's last); 70 chunk units of D/32
    against ring's 126 of D/64 (2.19 D vs 1.97 D)."""
    assert all(t < r for t, r in zip(lockstep("mesh:8x8", "ring-2d"), lockstep("mesh:8x8", "ring")))


@pytest.mark.xfail(strict=True, reason="docs/multitree.md, Errata M2; not reproduced in lockstep rounds: 2D-ring 6.6 vs ring 7.4 GB/s at 32 KiB "
                                       "and a tie (16.0) at 64 MiB on the 4x4 mesh; the event model has it win")
def test_lockstep_2d_ring_beats_ring_on_the_4x4_mesh() -> None:
    assert all(t > r for t, r in zip(lockstep("mesh:4x4", "ring-2d"), lockstep("mesh:4x4", "ring")))
