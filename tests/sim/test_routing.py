"""Router: minimal routes, torus ties split both ways, switch paths, capacities."""

from __future__ import annotations

import pytest

from collc.errors import TopologyError
from collc.sim.routing import Router
from collc.topology import parse_spec


def test_torus_half_way_peer_uses_both_directions() -> None:
    r = Router(parse_spec("torus:4x4"))
    assert dict(r.shares(0, 2)) == {(0, 1): 0.5, (1, 2): 0.5, (0, 3): 0.5, (3, 2): 0.5}
    assert r.hops(0, 2) == 2.0


def test_torus_dor_policy_takes_the_positive_way() -> None:
    r = Router(parse_spec("torus:4x4"), policy="dor")
    assert dict(r.shares(0, 2)) == {(0, 1): 1.0, (1, 2): 1.0}


def test_torus_dimension_order_and_fractions_sum_to_hops() -> None:
    r = Router(parse_spec("torus:8x8"))
    for a, b in [(0, 9), (0, 36), (5, 60), (63, 0)]:
        shares = dict(r.shares(a, b))
        assert all(0 < f <= 1 for f in shares.values())
        # each unit of traffic leaves a and enters b once
        assert sum(f for (u, _), f in shares.items() if u == a) == pytest.approx(1.0)
        assert sum(f for (_, v), f in shares.items() if v == b) == pytest.approx(1.0)


def test_bidirectional_ring_routes_as_a_1d_torus_and_uni_ring_one_way() -> None:
    assert Router(parse_spec("ring:8")).hops(0, 4) == 4.0
    assert dict(Router(parse_spec("ring:8")).shares(0, 4))[(0, 7)] == 0.5
    assert dict(Router(parse_spec("ring:8:uni")).shares(0, 7)) == {(i, i + 1): 1.0 for i in range(7)}


def test_mesh_has_no_wraparound() -> None:
    assert Router(parse_spec("mesh:4x4")).hops(0, 3) == 3.0


def test_switch_paths_and_capacity() -> None:
    r = Router(parse_spec("switch:4:bw=25"))
    assert r.shares(0, 3) == (((0, 4), 1.0), ((4, 3), 1.0))
    assert r.capacity((0, 4)) == 25.0
    with pytest.raises(TopologyError):
        r.capacity((0, 1))


def test_unknown_policy() -> None:
    with pytest.raises(TopologyError, match="routing policy"):
        Router(parse_spec("ring:4"), policy="valiant")
