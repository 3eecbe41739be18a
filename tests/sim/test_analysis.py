"""Step model, lower bounds and link loads: the closed forms and the papers' numbers."""

from __future__ import annotations

import math

import pytest

from collc.frontends.registry import build_schedule
from collc.ir.collective import CollKind
from collc.ir.verify import verify_schedule
from collc.sim.analysis import (allreduce_moore_bound, bus_bandwidth, congestion_deficiency, link_loads,
                                lower_bounds, moore_diameter, step_loads, step_time, step_times)
from collc.sim.routing import Router
from collc.topology import parse_spec
from tests._applicable import applicable

M = 1 << 24          # bytes
ALPHA = 7.5          # us
B = 25.0             # GB/s, the links of `:bw=25` topologies
RATE = B * 1e3       # bytes per us


@pytest.mark.parametrize("n", [4, 8, 16, 32])
def test_ring_allreduce_closed_form(n: int) -> None:
    topo = parse_spec(f"ring:{n}:bw=25")
    s = build_schedule("ring", topo, CollKind.ALLREDUCE, inplace=True)
    expect = 2 * (n - 1) * (ALPHA + M / (n * RATE))
    assert step_time(s, topo, M, ALPHA) == pytest.approx(expect, rel=1e-3)


@pytest.mark.parametrize("spec", ["hypercube:3:bw=25", "hypercube:5:bw=25", "switch:16:bw=25"])
def test_recursive_doubling_closed_forms(spec: str) -> None:
    topo = parse_spec(spec)
    n = topo.nranks
    logn = int(math.log2(n))
    rd = build_schedule("recursive-doubling", topo, CollKind.ALLREDUCE, inplace=True)
    assert step_time(rd, topo, M, ALPHA) == pytest.approx(logn * (ALPHA + M / RATE), rel=1e-3)
    rhd = build_schedule("recursive-halving-doubling", topo, CollKind.ALLREDUCE, inplace=True)
    expect = 2 * logn * ALPHA + 2 * (n - 1) / n * M / RATE
    assert step_time(rhd, topo, M, ALPHA) == pytest.approx(expect, rel=1e-3)


def test_out_of_place_local_copies_cost_nothing() -> None:
    topo = parse_spec("ring:8:bw=25")
    a = build_schedule("ring", topo, CollKind.ALLREDUCE, inplace=True)
    b = build_schedule("ring", topo, CollKind.ALLREDUCE, inplace=False)
    assert step_time(a, topo, M, ALPHA) == pytest.approx(step_time(b, topo, M, ALPHA))


def test_direct_connect_table4_lower_bound() -> None:
    # direct-connect.md 4.2: N=1024, d=4, alpha=10us, B=100 Gb/s, M=1 MiB -> 267.6 us
    assert moore_diameter(1024, 4) == 5
    assert allreduce_moore_bound(1024, 4, 1 << 20, 10.0, 100.0) == pytest.approx(267.6, abs=0.05)


def test_moore_diameter_small_cases() -> None:
    assert [moore_diameter(n, 2) for n in (1, 2, 3, 4, 7, 8, 15, 16)] == [0, 1, 1, 2, 2, 3, 3, 4]


def test_link_loads_ring_and_recursive_doubling_on_a_ring() -> None:
    topo = parse_spec("ring:8")
    ring = build_schedule("ring", topo, CollKind.ALLREDUCE, inplace=True)
    loads = step_loads(ring, Router(topo), 8.0)
    assert [s.max_messages for s in loads] == [1.0] * 14
    assert all(s.utilization == 0.5 for s in loads)  # one direction of every link


def test_busbw_factors() -> None:
    assert bus_bandwidth(CollKind.ALLREDUCE, 8, 1e9, 1e6) == (1.0, 1.75)
    assert bus_bandwidth(CollKind.ALLGATHER, 8, 1e9, 1e6) == (1.0, 0.875)
    assert bus_bandwidth(CollKind.BROADCAST, 8, 1e9, 1e6) == (1.0, 1.0)


def test_congestion_deficiency_of_a_bidirectional_ring() -> None:
    topo = parse_spec("ring:16")
    s = build_schedule("ring", topo, CollKind.ALLREDUCE, inplace=True, params={"bidirectional": "true"})
    assert congestion_deficiency(s, topo) == pytest.approx(15 / 16)  # -> 1 as p grows (Swing Table 2)


CASES = applicable(("ring:8", "torus:4x4", "hypercube:3", "switch:8", "ring:5", "mesh:2x4", "complete:6",
                    "kautz:2,2", "dfc:2x3"), inplace=True, root=1)


@pytest.mark.parametrize("name, kind, spec", CASES)
@pytest.mark.parametrize("size", [1 << 10, 1 << 26])
def test_step_model_never_beats_the_lower_bounds(name: str, kind: CollKind, spec: str, size: int) -> None:
    topo = parse_spec(spec)
    s = build_schedule(name, topo, kind, inplace=True, root=1 if kind.rooted else None)
    verify_schedule(s, topo)
    bounds = lower_bounds(kind, topo, size, ALPHA)
    t = step_time(s, topo, size, ALPHA)
    assert t >= bounds.total_us * (1 - 1e-9), (t, bounds)


def test_step_times_matches_step_time_at_every_size() -> None:
    topo = parse_spec("torus:4x4")
    s = build_schedule("ring", topo, CollKind.ALLGATHER)
    sizes = [1024.0 * 4 ** k for k in range(8)]
    many = step_times(s, topo, sizes, ALPHA, hop_latency_us=0.1)
    assert many == pytest.approx([step_time(s, topo, m, ALPHA, hop_latency_us=0.1) for m in sizes])


def test_link_loads_every_link_and_moore_latency() -> None:
    topo = parse_spec("hypercube:3")
    s = build_schedule("recursive-halving-doubling", topo, CollKind.ALLREDUCE, inplace=True)
    loads = link_loads(s, Router(topo), 8.0)
    assert len(loads) == 6
    # step 0 of halving: every rank sends half the vector to r xor 4 over its own link
    assert loads[0] == {(r, r ^ 4): (4.0, 1.0) for r in range(8)}
    b = lower_bounds(CollKind.ALLREDUCE, topo, 8.0, alpha_us=1.0)
    assert b.latency_us == 3.0 and b.moore_us == 2.0   # diameter 3; a degree-3 graph of 8 could have 2
