from __future__ import annotations

import itertools

import networkx as nx  # type: ignore[import-untyped]
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collc.errors import TopologyError
from collc.topology import Link, Topology, complete, hypercube, mesh, parse_spec, ring, switch, torus

SPECS = ["ring:5", "ring:6:uni", "torus:3x4", "torus:2x2x3", "mesh:3x3", "mesh:2x5", "hypercube:3",
         "complete:5", "switch:6"]
property_settings = settings(database=None, deadline=None, max_examples=40)


def bidi(pairs: list[tuple[int, int]], **kw: float) -> tuple[Link, ...]:
    return tuple(lk for a, b in pairs for lk in (Link(a, b, **kw), Link(b, a, **kw)))  # type: ignore[arg-type]


def two_level() -> Topology:
    """Ranks 0-3; rank 0,1 on switch 4, rank 2,3 on switch 5, switches joined; 0<->2 direct."""
    return Topology("two-level", 4, bidi([(0, 4), (1, 4), (2, 5), (3, 5), (4, 5), (0, 2)]), nswitches=2)


# ---------------------------------------------------------------------- Link
@pytest.mark.parametrize("kwargs, message", [
    ({"src": 1, "dst": 1}, "itself"),
    ({"src": -1, "dst": 1}, ">= 0"),
    ({"src": 0.5, "dst": 1}, "integers"),
    ({"src": True, "dst": 1}, "integers"),
    ({"src": 0, "dst": 1, "bandwidth": 0}, "bandwidth"),
    ({"src": 0, "dst": 1, "bandwidth": float("nan")}, "bandwidth"),
    ({"src": 0, "dst": 1, "bandwidth": float("inf")}, "bandwidth"),
    ({"src": 0, "dst": 1, "bandwidth": "25"}, "bandwidth"),
    ({"src": 0, "dst": 1, "latency": -0.1}, "latency"),
    ({"src": 0, "dst": 1, "multiplicity": 0}, "multiplicity"),
    ({"src": 0, "dst": 1, "multiplicity": 1.0}, "multiplicity"),
])
def test_link_invalid(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(TopologyError, match=message):
        Link(**kwargs)  # type: ignore[arg-type]


def test_link_normalises_numbers_and_reverses() -> None:
    lk = Link(0, 1, 25, 1, 2)
    assert isinstance(lk.bandwidth, float) and isinstance(lk.latency, float)
    assert lk == Link(0, 1, 25.0, 1.0, 2)
    assert lk.reversed() == Link(1, 0, 25.0, 1.0, 2)
    assert lk.to_dict() == {"src": 0, "dst": 1, "bandwidth": 25.0, "latency": 1.0, "multiplicity": 2}


# ---------------------------------------------------------------------- Topology construction
@pytest.mark.parametrize("build, message", [
    (lambda: Topology("t", 0, ()), "nranks"),
    (lambda: Topology("t", 2, (), nswitches=-1), "nswitches"),
    (lambda: Topology("t", 2, (Link(0, 2),)), "names node 2"),
    (lambda: Topology("t", 2, (Link(0, 1), Link(0, 1, 2.0))), "duplicate link 0->1"),
    (lambda: Topology("t", 2, ("0->1",)), "Link values"),  # type: ignore[arg-type]
    (lambda: Topology("t", 2, (), params=(("a", "1"), ("a", "2"))), "duplicate parameter"),
    (lambda: Topology("t", 2, (), params=("ab",)), "pairs"),  # type: ignore[arg-type]
    (lambda: Topology("t", 3, bidi([(0, 1), (1, 2), (2, 0)]), cycle=(0, 1)), "every rank"),
    (lambda: Topology("t", 3, bidi([(0, 1), (1, 2)]), cycle=(0, 1, 2)), "cycle step 2->0"),
])
def test_topology_invalid(build: object, message: str) -> None:
    with pytest.raises(TopologyError, match=message):
        build()  # type: ignore[operator]


def test_links_are_sorted_and_order_independent() -> None:
    links = bidi([(0, 1), (1, 2), (2, 0)])
    a = Topology("t", 3, links)
    b = Topology("t", 3, tuple(reversed(links)))
    assert a == b and hash(a) == hash(b)
    assert [(lk.src, lk.dst) for lk in a.links] == sorted((lk.src, lk.dst) for lk in links)
    assert Topology("t", 3, list(links)).links == a.links  # type: ignore[arg-type]


def test_basic_queries() -> None:
    t = two_level()
    assert t.nnodes == 6 and t.ranks == range(4) and t.switches == range(4, 6)
    assert [t.is_switch(n) for n in range(6)] == [False] * 4 + [True] * 2
    assert t.out_neighbors(4) == (0, 1, 5) and t.in_neighbors(5) == (2, 3, 4)
    assert t.out_neighbors(0) == (2, 4)
    assert t.link(0, 2) == Link(0, 2) and t.link(0, 1) is None
    assert t.has_link(4, 5) and not t.has_link(1, 2)
    with pytest.raises(TopologyError, match="out of range"):
        t.out_neighbors(6)
    with pytest.raises(TopologyError, match="out of range"):
        t.is_switch(-1)


def test_bidirectional_and_transpose() -> None:
    assert ring(8).is_bidirectional()
    uni = ring(8, bidirectional=False)
    assert not uni.is_bidirectional()
    tr = uni.transpose()
    assert {(lk.src, lk.dst) for lk in tr.links} == {((i + 1) % 8, i) for i in range(8)}
    assert tr.name == "ring:8:uni^T"
    assert tr.hamiltonian_cycle() == (0, 7, 6, 5, 4, 3, 2, 1)
    assert tr.transpose() == uni


@property_settings
@given(st.sampled_from(SPECS))
def test_transpose_twice_is_identity(spec: str) -> None:
    t = parse_spec(spec)
    assert t.transpose().transpose() == t


def test_graph_attributes() -> None:
    t = Topology("g", 2, (Link(0, 2, 5.0, 0.5, 2), Link(2, 1)), nswitches=1)
    g = t.graph()
    assert isinstance(g, nx.DiGraph) and sorted(g.nodes) == [0, 1, 2]
    assert g.nodes[2]["switch"] and not g.nodes[0]["switch"]
    assert g.edges[0, 2] == {"bandwidth": 5.0, "latency": 0.5, "multiplicity": 2, "kind": "net"}
    assert g.number_of_edges() == 2


# ---------------------------------------------------------------------- distances and paths
@pytest.mark.parametrize("spec", SPECS)
def test_distances_match_networkx(spec: str) -> None:
    t = parse_spec(spec)
    g = t.graph()
    for a in range(t.nnodes):
        expected = nx.single_source_shortest_path_length(g, a)
        assert t.distances_from(a) == dict(expected)
        for b in range(t.nnodes):
            assert t.distance(a, b) == expected[b]
    rank_ecc = max(nx.single_source_shortest_path_length(g, a)[b] for a in t.ranks for b in t.ranks)
    assert t.diameter() == rank_ecc


@pytest.mark.parametrize("spec", SPECS)
def test_shortest_path_is_smallest_shortest(spec: str) -> None:
    t = parse_spec(spec)
    g = t.graph()
    for a, b in itertools.product(range(t.nnodes), repeat=2):
        expected = min(tuple(p) for p in nx.all_shortest_paths(g, a, b))
        assert t.shortest_path(a, b) == expected


def test_unreachable_and_disconnected() -> None:
    t = Topology("split", 3, (Link(0, 1), Link(1, 0)))
    assert t.distances_from(0) == {0: 0, 1: 1}
    with pytest.raises(TopologyError, match="not reachable"):
        t.distance(0, 2)
    with pytest.raises(TopologyError, match="not reachable"):
        t.shortest_path(2, 0)
    with pytest.raises(TopologyError, match="not all reachable"):
        t.diameter()
    assert Topology("one", 1, ()).diameter() == 0


def test_distance_through_switch() -> None:
    t = switch(8)
    assert t.distance(0, 5) == 2 and t.shortest_path(0, 5) == (0, 8, 5)
    assert t.diameter() == 2


# ---------------------------------------------------------------------- routes
def test_route_direct_and_through_switches() -> None:
    t = two_level()
    assert t.route(0, 2) == (0, 2)            # direct link wins
    assert t.route(0, 1) == (0, 4, 1)
    assert t.route(1, 3) == (1, 4, 5, 3)      # two switches
    assert t.route(2, 2) == (2,)
    assert t.rank_reachable(3, 0)


def test_route_never_passes_through_ranks() -> None:
    t = ring(8)
    assert t.route(0, 1) == (0, 1)
    assert t.route(0, 2) is None and not t.rank_reachable(0, 2)
    # rank 1 is a switch-free relay only: 0 -> 1 -> 2 is not a route
    t2 = Topology("relay", 3, (Link(0, 1), Link(1, 2), Link(0, 3), Link(3, 1)), nswitches=1)
    assert t2.route(0, 2) is None and t2.route(0, 1) == (0, 1)


def test_route_prefers_lowest_switch_and_shortest() -> None:
    # 0 -> switch 3 -> switch 4 -> 1 (long) and 0 -> switch 5 -> 1, 0 -> switch 6 -> 1 (short)
    links = (Link(0, 3), Link(3, 4), Link(4, 1), Link(0, 6), Link(6, 1), Link(0, 5), Link(5, 1))
    t = Topology("choice", 3, links, nswitches=4)
    assert t.route(0, 1) == (0, 5, 1)
    assert t.route(1, 0) is None


def test_route_on_large_switch() -> None:
    # its speed: benchmarks/topology_speed.py
    t = switch(4096)
    for a in range(0, 4096, 7):
        assert t.route(a, (a + 1) % 4096) == (a, 4096, (a + 1) % 4096)


# ---------------------------------------------------------------------- Hamiltonian cycles
def assert_hamiltonian(t: Topology, cycle: tuple[int, ...] | None) -> None:
    assert cycle is not None
    assert sorted(cycle) == list(t.ranks)
    for a, b in zip(cycle, cycle[1:] + cycle[:1]):
        assert a == b or t.route(a, b) is not None, (a, b)


def test_cycle_search_small() -> None:
    # a 3x2 prism drawn with scrambled labels, no recorded cycle
    pairs = [(0, 3), (3, 5), (5, 0), (1, 2), (2, 4), (4, 1), (0, 1), (3, 2), (5, 4)]
    t = Topology("prism", 6, bidi(pairs))
    assert t.cycle is None
    assert_hamiltonian(t, t.hamiltonian_cycle())
    assert t.hamiltonian_cycle() == t.hamiltonian_cycle()


def test_cycle_search_uses_switch_routes() -> None:
    t = Topology("sw", 3, bidi([(0, 3), (1, 3), (2, 3)]), nswitches=1)
    assert t.hamiltonian_cycle() == (0, 1, 2)


def test_cycle_search_none() -> None:
    star = Topology("star", 4, bidi([(0, 1), (0, 2), (0, 3)]))
    assert star.hamiltonian_cycle() is None
    big_path = Topology("path", 17, bidi([(i, i + 1) for i in range(16)]))
    assert big_path.hamiltonian_cycle() is None
    assert Topology("one", 1, ()).hamiltonian_cycle() == (0,)


@pytest.mark.parametrize("spec", SPECS)
def test_generated_cycles_are_recorded_and_valid(spec: str) -> None:
    t = parse_spec(spec)
    if spec == "mesh:3x3":
        assert t.hamiltonian_cycle() is None
    else:
        assert t.cycle is not None
        assert_hamiltonian(t, t.hamiltonian_cycle())


# ---------------------------------------------------------------------- dict round trip
@pytest.mark.parametrize("spec", SPECS + ["ring:4:uni,bw=25,lat=0.7"])
def test_dict_round_trip(spec: str) -> None:
    t = parse_spec(spec)
    d = t.to_dict()
    # every topology says where its ranks are (hosts); IPC domains only when some span several hosts
    assert list(d) == ["name", "nranks", "nswitches", "hosts", "params", "links"] + (["cycle"] if t.cycle else [])
    assert len(d["hosts"]) == t.nranks
    assert Topology.from_dict(d) == t


def test_round_trip_keeps_multiplicity_and_switches() -> None:
    t = Topology("x", 2, (Link(0, 2, 3.5, 0.25, 4), Link(2, 1), Link(1, 2), Link(2, 0)), nswitches=1,
                 params=(("k", "v"),), cycle=(1, 0))
    assert Topology.from_dict(t.to_dict()) == t


def test_from_dict_defaults_and_bidirectional() -> None:
    t = Topology.from_dict({
        "nranks": 2,
        "defaults": {"bandwidth": 25, "latency": 0.7},
        "links": [{"src": 0, "dst": 1, "bidirectional": True}, ],
        "params": {"n": 2},
    })
    assert t.name == "custom" and t.params == (("n", "2"),)
    assert t.links == (Link(0, 1, 25.0, 0.7), Link(1, 0, 25.0, 0.7))


@pytest.mark.parametrize("d, message", [
    ({}, "missing required key 'nranks'"),
    ({"nranks": "4"}, "nranks must be an integer"),
    ({"nranks": 0}, "nranks must be >= 1"),
    ({"nranks": 2, "color": "red"}, "unknown key"),
    ({"nranks": 2, "links": [{"src": 0}]}, r"links\[0\]: missing required key 'dst'"),
    ({"nranks": 2, "links": [{"src": 0, "dst": 5}]}, "names node 5"),
    ({"nranks": 2, "links": [{"src": 0, "dst": 1, "bandwidth": "abc"}]}, r"links\[0\].bandwidth must be a finite"),
    ({"nranks": 2, "links": [{"src": 0, "dst": 1, "bandwidth": -1}]}, r"links\[0\]: .*bandwidth"),
    ({"nranks": 2, "links": [{"src": 0, "dst": 1, "bidirectional": "yes"}]}, "true or false"),
    ({"nranks": 2, "links": [{"src": 0, "dst": 1, "weight": 1}]}, "unknown key"),
    ({"nranks": 2, "links": [[0, 1]]}, "must be a mapping"),
    ({"nranks": 2, "links": {"src": 0}}, "links must be a list"),
    ({"nranks": 2, "defaults": {"bw": 1}}, "defaults: unknown key"),
    ({"nranks": 2, "cycle": "01"}, "cycle must be a list"),
    ({"nranks": 2, "params": [1, 2]}, "params must be a mapping"),
    ({"nranks": 2, "name": 3}, "name must be"),
])
def test_from_dict_invalid(d: dict[str, object], message: str) -> None:
    with pytest.raises(TopologyError, match=message):
        Topology.from_dict(d)


# ---------------------------------------------------------------------- speed
def test_large_torus() -> None:
    # its speed: benchmarks/topology_speed.py
    t = torus([64, 64])
    assert t.nranks == 4096 and len(t.links) == 4 * 4096
    assert t.distance(0, 32 * 64 + 32) == 64
    assert t.distance(5, 4000) == t.distance(4000, 5)
    assert t.route(0, 1) == (0, 1)


def test_generators_share_model_equality() -> None:
    assert hypercube(1) == Topology("hypercube:1", 2, (Link(0, 1), Link(1, 0)), params=(("d", "1"),),
                                    cycle=(0, 1))
    assert complete(3) != mesh([3])
