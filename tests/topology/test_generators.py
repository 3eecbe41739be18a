from __future__ import annotations

import itertools
import math
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collc.errors import TopologyError
from collc.topology import Topology, complete, coords, hypercube, mesh, rank_of, ring, switch, torus

property_settings = settings(database=None, deadline=None, max_examples=60)
dims_strategy = st.lists(st.integers(min_value=2, max_value=6), min_size=1, max_size=3)


def assert_link_cycle(t: Topology) -> None:
    """The recorded cycle visits every rank once and each hop is a direct link."""
    cycle = t.hamiltonian_cycle()
    assert cycle is not None and t.cycle == cycle
    assert sorted(cycle) == list(range(t.nranks))
    for a, b in zip(cycle, cycle[1:] + cycle[:1]):
        assert t.has_link(a, b), (a, b)


# ---------------------------------------------------------------------- link counts
@pytest.mark.parametrize("build, nlinks, nswitches", [
    (lambda: ring(8), 16, 0),
    (lambda: ring(8, bidirectional=False), 8, 0),
    (lambda: ring(2), 2, 0),
    (lambda: torus([4, 4]), 64, 0),
    (lambda: torus([2, 4]), 24, 0),
    (lambda: torus([2, 2]), 8, 0),
    (lambda: torus([4, 4, 4]), 384, 0),
    (lambda: mesh([4, 4]), 48, 0),
    (lambda: mesh([2, 3]), 14, 0),
    (lambda: hypercube(3), 24, 0),
    (lambda: complete(8), 56, 0),
    (lambda: switch(8), 16, 1),
])
def test_link_counts(build: Callable[[], Topology], nlinks: int, nswitches: int) -> None:
    t = build()
    assert len(t.links) == nlinks
    assert t.nswitches == nswitches
    assert len({(lk.src, lk.dst) for lk in t.links}) == nlinks
    assert all(lk.multiplicity == 1 for lk in t.links)


def test_ring_directions() -> None:
    assert {(lk.src, lk.dst) for lk in ring(4, bidirectional=False).links} == {(0, 1), (1, 2), (2, 3), (3, 0)}
    assert ring(4).out_neighbors(0) == (1, 3)


def test_switch_structure() -> None:
    t = switch(8)
    assert t.nranks == 8 and t.nnodes == 9 and t.is_switch(8)
    assert t.out_neighbors(8) == tuple(range(8)) and t.in_neighbors(8) == tuple(range(8))
    assert t.route(2, 6) == (2, 8, 6)
    assert all(t.distance(a, b) == 2 for a in range(8) for b in range(8) if a != b)


# ---------------------------------------------------------------------- names and params
@pytest.mark.parametrize("t, name, params", [
    (ring(8), "ring:8", (("n", "8"), ("direction", "bi"))),
    (ring(8, bidirectional=False), "ring:8:uni", (("n", "8"), ("direction", "uni"))),
    (ring(8, False, 25.0, 0.7), "ring:8:uni,bw=25,lat=0.7",
     (("n", "8"), ("direction", "uni"), ("bandwidth", "25"), ("latency", "0.7"))),
    (torus([4, 4]), "torus:4x4", (("dims", "4x4"),)),
    (torus([4, 4, 4], latency=1.5), "torus:4x4x4:lat=1.5", (("dims", "4x4x4"), ("latency", "1.5"))),
    (mesh([2, 3]), "mesh:2x3", (("dims", "2x3"),)),
    (hypercube(4), "hypercube:4", (("d", "4"),)),
    (complete(8, bandwidth=12.5), "complete:8:bw=12.5", (("n", "8"), ("bandwidth", "12.5"))),
    (switch(8), "switch:8", (("n", "8"),)),
])
def test_names_and_params(t: Topology, name: str, params: tuple[tuple[str, str], ...]) -> None:
    assert t.name == name
    assert t.params == params


def test_link_attributes_applied() -> None:
    t = torus([2, 3], bandwidth=25, latency=0.7)
    assert {(lk.bandwidth, lk.latency) for lk in t.links} == {(25.0, 0.7)}


# ---------------------------------------------------------------------- coordinates
def test_coords_row_major() -> None:
    assert coords(0, [4, 4]) == (0, 0)
    assert coords(6, [4, 4]) == (1, 2)
    assert coords(23, [2, 3, 4]) == (1, 2, 3)
    assert rank_of((1, 2, 3), [2, 3, 4]) == 23
    t = torus([3, 5])
    assert t.out_neighbors(rank_of((1, 4), [3, 5])) == tuple(sorted(
        rank_of(c, [3, 5]) for c in [(0, 4), (2, 4), (1, 3), (1, 0)]))


@property_settings
@given(dims_strategy, st.data())
def test_coords_round_trip(dims: list[int], data: st.DataObject) -> None:
    rank = data.draw(st.integers(min_value=0, max_value=math.prod(dims) - 1))
    c = coords(rank, dims)
    assert len(c) == len(dims) and all(0 <= x < d for x, d in zip(c, dims))
    assert rank_of(c, dims) == rank


@pytest.mark.parametrize("call, message", [
    (lambda: coords(16, [4, 4]), "out of range"),
    (lambda: coords(-1, [4, 4]), "out of range"),
    (lambda: rank_of((4, 0), [4, 4]), "out of range"),
    (lambda: rank_of((1,), [4, 4]), "out of range"),
    (lambda: coords(0, [0, 4]), ">= 2"),
])
def test_coords_invalid(call: Callable[[], object], message: str) -> None:
    with pytest.raises(TopologyError, match=message):
        call()


# ---------------------------------------------------------------------- distances
@pytest.mark.parametrize("t, diameter", [
    (torus([4, 4]), 4),
    (torus([2, 4]), 3),
    (torus([3, 3, 3]), 3),
    (ring(8), 4),
    (ring(8, bidirectional=False), 7),
    (hypercube(4), 4),
    (mesh([4, 4]), 6),
    (complete(8), 1),
    (switch(8), 2),
])
def test_diameter(t: Topology, diameter: int) -> None:
    assert t.diameter() == diameter


@property_settings
@given(dims_strategy, st.data())
def test_torus_distance_formula(dims: list[int], data: st.DataObject) -> None:
    t = torus(dims)
    a, b = (data.draw(st.integers(min_value=0, max_value=t.nranks - 1)) for _ in range(2))
    expected = sum(min(abs(x - y), d - abs(x - y)) for x, y, d in zip(coords(a, dims), coords(b, dims), dims))
    assert t.distance(a, b) == expected
    assert len(t.shortest_path(a, b)) == expected + 1


@property_settings
@given(dims_strategy, st.data())
def test_mesh_distance_is_manhattan(dims: list[int], data: st.DataObject) -> None:
    t = mesh(dims)
    a, b = (data.draw(st.integers(min_value=0, max_value=t.nranks - 1)) for _ in range(2))
    assert t.distance(a, b) == sum(abs(x - y) for x, y in zip(coords(a, dims), coords(b, dims)))
    assert t.diameter() == sum(d - 1 for d in dims)


@pytest.mark.parametrize("d", [1, 2, 3, 5])
def test_hypercube_distance_is_hamming(d: int) -> None:
    t = hypercube(d)
    for a, b in itertools.product(range(1 << d), repeat=2):
        assert t.distance(a, b) == bin(a ^ b).count("1")


# ---------------------------------------------------------------------- Hamiltonian cycles
@property_settings
@given(dims_strategy)
def test_torus_cycle_valid(dims: list[int]) -> None:
    assert_link_cycle(torus(dims))


@property_settings
@given(dims_strategy)
def test_mesh_cycle_iff_even_and_not_a_line(dims: list[int]) -> None:
    t = mesh(dims)
    if t.nranks % 2 == 0 and (len(dims) > 1 or dims == [2]):
        assert_link_cycle(t)
    else:
        assert t.cycle is None


@pytest.mark.parametrize("dims", [[3, 3], [5, 7], [3, 3, 3], [3, 5, 7], [7], [9, 3]])
def test_odd_torus_cycles(dims: list[int]) -> None:
    assert_link_cycle(torus(dims))


def test_torus_snake_when_it_closes() -> None:
    assert torus([4, 4]).cycle == (0, 1, 2, 3, 7, 6, 5, 4, 8, 9, 10, 11, 15, 14, 13, 12)


@pytest.mark.parametrize("d", range(1, 8))
def test_hypercube_gray_code_cycle(d: int) -> None:
    t = hypercube(d)
    assert_link_cycle(t)
    assert t.cycle == tuple(i ^ (i >> 1) for i in range(1 << d))


def test_line_has_no_cycle() -> None:
    assert mesh([4]).cycle is None and mesh([4]).hamiltonian_cycle() is None


@pytest.mark.parametrize("t", [ring(7), ring(7, bidirectional=False), complete(6), mesh([2]), mesh([2, 2])])
def test_simple_cycles(t: Topology) -> None:
    assert_link_cycle(t)


def test_switch_cycle() -> None:
    t = switch(5)
    assert t.hamiltonian_cycle() == (0, 1, 2, 3, 4)


def test_large_torus_cycle() -> None:
    assert_link_cycle(torus([63, 65]))


# ---------------------------------------------------------------------- invalid arguments
@pytest.mark.parametrize("call, message", [
    (lambda: ring(1), "ring size must be >= 2"),
    (lambda: ring(8.0), "ring size must be an integer"),  # type: ignore[arg-type]
    (lambda: ring(8, bidirectional=1), "bidirectional"),  # type: ignore[arg-type]
    (lambda: ring(8, bandwidth=0), "bandwidth"),
    (lambda: ring(8, latency=-1), "latency"),
    (lambda: ring(8, bandwidth=float("nan")), "bandwidth"),
    (lambda: torus([0, 8]), r"torus dimensions must each be >= 2, got 0x8"),
    (lambda: torus([]), "non-empty"),
    (lambda: torus("4x4"), "non-empty sequence"),  # type: ignore[arg-type]
    (lambda: torus([4, 4.0]), "integers"),  # type: ignore[list-item]
    (lambda: torus([1024, 1024]), "more than"),
    (lambda: mesh([1, 4]), "mesh dimensions must each be >= 2"),
    (lambda: hypercube(0), "hypercube dimension"),
    (lambda: hypercube(40), "hypercube dimension"),
    (lambda: complete(1), "complete graph size"),
    (lambda: complete(5000), "links"),
    (lambda: switch(1), "switch size"),
    (lambda: switch(True), "integer"),
])
def test_invalid_arguments(call: Callable[[], object], message: str) -> None:
    with pytest.raises(TopologyError, match=message):
        call()
