"""MultiTree's compiled Algorithm 1 (collc.frontends.multitree.grow): the same trees, allocation
for allocation, as the Python loop it replaces on large networks of direct links."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collc.frontends.multitree import build_trees, check_trees, eccentricities, grow
from collc.frontends.multitree.trees import _Grower, _unpack
from collc.topology import Link, Topology, parse_spec
from collc.topology.generators import mesh, torus

Grown = tuple[list[list[tuple[int, int, int]]], list[list[tuple[int, ...]]], list[tuple[int, int, int, int]], int]


def rounds_of(topo: Topology, order: str) -> tuple[list[int], list[int]]:
    n = topo.nranks
    later = list(range(n))
    if order == "priority":
        prio = eccentricities(topo)
        later = sorted(range(n), key=lambda r: (prio[r], r), reverse=True)
    return list(range(n)), later


def both(topo: Topology, rule: str, order: str, compiled: bool) -> tuple[Grown, Grown]:
    """(the Python loop's result, the kernel's) on ``topo``."""
    rounds = rounds_of(topo, order)
    g = _Grower(topo, 0)
    python = g._run_direct(rule, rounds)
    out = grow.grow_direct(g.direct, g.capacity, rule, rounds, compiled=compiled)
    assert out is not None
    return python, _unpack(topo.nranks, *out)


@st.composite
def direct_topologies(draw: st.DrawFn) -> Topology:
    """Networks of direct links only (the kernel's domain): grids and strongly connected digraphs
    with links of multiplicity 1 or 2."""
    kind = draw(st.sampled_from(["torus", "mesh", "digraph"]))
    if kind != "digraph":
        dims = draw(st.lists(st.integers(2, 4), min_size=1, max_size=3))
        return torus(dims) if kind == "torus" else mesh(dims)
    n = draw(st.integers(2, 9))
    cycle = draw(st.permutations(range(n)))
    pairs = {(cycle[i], cycle[(i + 1) % n]) for i in range(n)}
    pairs |= set(draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=16)))
    links = tuple(Link(a, b, multiplicity=draw(st.integers(1, 2))) for a, b in sorted(pairs) if a != b)
    return Topology("random", n, links)


@settings(database=None, deadline=None, max_examples=40)
@given(direct_topologies(), st.sampled_from(["any", "last"]), st.sampled_from(["ascending", "priority"]))
def test_kernel_source_equals_python_loop(topo: Topology, rule: str, order: str) -> None:
    """The kernel's source run by Python: every allocation, edge, path and T the same."""
    python, kernel = both(topo, rule, order, compiled=False)
    assert kernel == python


@pytest.mark.parametrize("spec, rule, order", [("torus:8x8", "any", "ascending"), ("mesh:6x6", "last", "priority"),
                                               ("torus:4x4x4", "last", "ascending"), ("hypercube:5", "any", "priority")])
def test_compiled_kernel_equals_python_loop(spec: str, rule: str, order: str) -> None:
    if grow._compiled() is None:
        pytest.skip("numba is not installed")
    python, kernel = both(parse_spec(spec), rule, order, compiled=True)
    assert kernel == python


def test_doubled_links_compiled() -> None:
    """Links of multiplicity 2 carry two tree edges a step in the kernel too."""
    if grow._compiled() is None:
        pytest.skip("numba is not installed")
    base = torus([4, 4])
    doubled = Topology.from_dict({"name": "torus-4x4-double", "nranks": 16, "params": {"dims": "4x4"},
                                  "defaults": {"multiplicity": 2},
                                  "links": [{"src": lk.src, "dst": lk.dst} for lk in base.links]})
    python, kernel = both(doubled, "any", "ascending", compiled=True)
    assert kernel == python and kernel[3] == 4


def test_large_torus_takes_the_kernel() -> None:
    """torus:24x24 (576 ranks) is past MIN_RANKS: build_trees takes the kernel and its trees are
    the Python loop's."""
    topo = parse_spec("torus:24x24")
    assert topo.nranks >= grow.MIN_RANKS
    if not grow.worth_it(topo.nranks):
        pytest.skip("numba is not installed or has no cache directory")
    trees = build_trees(topo)
    check_trees(trees, topo)
    edges, paths, sequence, steps = _Grower(topo, 0)._run_direct("any", rounds_of(topo, "ascending"))
    assert trees.edges == tuple(map(tuple, edges)) and trees.paths == tuple(map(tuple, paths))
    assert trees.sequence == tuple(sequence) and trees.steps == steps


def test_small_topologies_stay_in_python() -> None:
    """Below MIN_RANKS numba is not worth loading."""
    assert not grow.worth_it(grow.MIN_RANKS - 1)
    assert not grow.worth_it(64)
