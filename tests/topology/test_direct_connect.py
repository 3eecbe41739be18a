"""Direct-connect families (direct-connect paper, Table 9, Table 7, Thm 22)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from collc.errors import TopologyError
from collc.frontends.bfb import bfb_allgather
from collc.topology import parse_spec
from collc.topology.direct_connect import min_diameter_generators

# Table 7: (graph, N, diameter under BFB); every one degree 4 and BW-optimal (Thm 18)
TABLE7 = [("octahedron", 6, 2), ("paley9", 9, 2), ("k55-matching", 10, 3), ("heawood-distance3", 14, 3),
          ("petersen-line", 15, 3), ("q4", 16, 4), ("heawood-line", 21, 3), ("pg23-incidence", 26, 3),
          ("ag24-incidence", 32, 4), ("odd4", 35, 3), ("tutte8-line", 45, 4), ("doubled-odd4", 70, 7),
          ("gq33-incidence", 80, 4)]


@pytest.mark.parametrize("name, n, diameter", TABLE7)
def test_table7_distance_regular_graphs(name: str, n: int, diameter: int) -> None:
    t = parse_spec(f"drg:{name}")
    assert t.nranks == n and t.is_bidirectional()
    assert {len(t.out_neighbors(v)) for v in t.ranks} == {4}
    r = bfb_allgather(t)
    assert (r.diameter, r.beta) == (diameter, Fraction(n - 1, n))


@pytest.mark.parametrize("n, gens, diameter", [(7, (2, 3), 2), (10, (2, 3), 2), (11, (2, 3), 2), (12, (2, 3), 2),
                                               (16, (3, 4), 3), (64, (6, 7), 6), (256, (11, 12), 11),
                                               (1024, (23, 24), 23)])
def test_thm22_minimum_diameter_circulant(n: int, gens: tuple[int, int], diameter: int) -> None:
    assert min_diameter_generators(n) == gens
    t = parse_spec(f"circulant:{n}")
    assert t.name == f"circulant:{n}:{gens[0]},{gens[1]}" and t.diameter() == diameter


def test_thm22_is_the_minimum_over_two_generator_circulants() -> None:
    for n in range(5, 40):
        best = min(parse_spec(f"circulant:{n}:{a},{b}").diameter() for a in range(1, n // 2 + 1)
                   for b in range(a + 1, n // 2 + 1) if __import__("math").gcd(n, a, b) == 1)
        assert parse_spec(f"circulant:{n}").diameter() == best, n


@pytest.mark.parametrize("spec, n, ports, diameter", [("bipartite:4", 8, 4, 2), ("hamming:2,3", 9, 4, 2),
                                                      ("hamming:4,2", 16, 4, 4), ("debruijn:4,2", 16, 4, 2),
                                                      ("genkautz:4,20", 20, 4, 2), ("twistedtorus:4x8", 32, 4, 4)])
def test_family_shapes(spec: str, n: int, ports: int, diameter: int) -> None:
    t = parse_spec(spec)
    assert t.nranks == n and t.diameter() == diameter
    assert bfb_allgather(t).graph.degree == ports
    assert parse_spec(t.name) == t


@pytest.mark.parametrize("spec, message", [("circulant:12:0,3", "generators must lie"),
                                           ("circulant:12:2,4", "disconnected"), ("hamming:2", "two integers"),
                                           ("drg:nope", "unknown distance-regular"), ("debruijn:1,3", ">= 2"),
                                           ("bipartite:4:x", "takes no options")])
def test_bad_specs(spec: str, message: str) -> None:
    with pytest.raises(TopologyError, match=message):
        parse_spec(spec)
