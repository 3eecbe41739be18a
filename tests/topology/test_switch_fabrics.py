"""The switch-fabric families of the MultiTree paper: fattree, bigraph, dgx2."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from collc.errors import TopologyError
from collc.topology import Topology, parse_spec
from collc.topology.generators import bigraph, dgx2, fattree


def _switch_of(t: Topology, rank: int) -> int:
    ups = [s for s in t.out_neighbors(rank) if t.is_switch(s)]
    assert len(ups) == 1 and t.in_neighbors(rank) == (ups[0],)
    return ups[0]


# ---------------------------------------------------------------------- counts and structure
@pytest.mark.parametrize("spec, nranks, nswitches, nlinks", [
    ("fattree:8", 64, 16, 256),
    ("fattree:4", 16, 8, 64),
    ("fattree:2", 4, 4, 16),
    ("bigraph:4x8", 32, 8, 96),
    ("bigraph:4x16", 64, 16, 256),
    ("bigraph:1x2", 2, 2, 6),
    ("dgx2:16", 16, 2, 34),
    ("dgx2:2", 2, 2, 6),
])
def test_counts(spec: str, nranks: int, nswitches: int, nlinks: int) -> None:
    t = parse_spec(spec)
    assert (t.nranks, t.nswitches, len(t.links)) == (nranks, nswitches, nlinks)
    assert t.name == spec and parse_spec(t.name) == t
    assert t.is_bidirectional()
    assert all(t.route(a, b) is not None for a in t.ranks for b in t.ranks)
    assert t.hamiltonian_cycle() == tuple(range(nranks))


def test_fattree_structure() -> None:
    t = fattree(8)
    leaves, spines = range(64, 72), range(72, 80)
    for r in t.ranks:
        assert _switch_of(t, r) == 64 + r // 8
    for leaf in leaves:
        assert t.out_neighbors(leaf) == tuple(range((leaf - 64) * 8, (leaf - 63) * 8)) + tuple(spines)
    for spine in spines:
        assert t.out_neighbors(spine) == tuple(leaves) and t.in_neighbors(spine) == tuple(leaves)
    assert all(lk.multiplicity == 1 for lk in t.links)
    assert t.params == (("k", "8"),)


def test_bigraph_structure() -> None:
    t = bigraph(4, 8)
    upper, lower = range(32, 36), range(36, 40)
    for r in t.ranks:
        assert _switch_of(t, r) == 32 + r // 4
    for u in upper:
        assert [s for s in t.out_neighbors(u) if t.is_switch(s)] == list(lower)
    for lo in lower:
        assert [s for s in t.out_neighbors(lo) if t.is_switch(s)] == list(upper)
    assert not t.has_link(32, 33) and not t.has_link(36, 37)
    assert t.params == (("m", "4"), ("n", "8"))


def test_dgx2_structure() -> None:
    t = dgx2(16)
    assert [_switch_of(t, r) for r in t.ranks] == [16] * 8 + [17] * 8
    assert t.link(16, 17) is not None and t.link(16, 17).multiplicity == 8  # type: ignore[union-attr]
    assert t.link(17, 16).multiplicity == 8  # type: ignore[union-attr]
    assert sum(lk.multiplicity for lk in t.links) == 32 + 16


# ---------------------------------------------------------------------- routes and distances
@pytest.mark.parametrize("spec, a, b, route", [
    ("fattree:8", 0, 1, (0, 64, 1)),
    ("fattree:8", 0, 8, (0, 64, 72, 65, 8)),
    ("fattree:8", 63, 0, (63, 71, 72, 64, 0)),
    ("bigraph:4x8", 0, 3, (0, 32, 3)),
    ("bigraph:4x8", 0, 16, (0, 32, 36, 16)),       # upper -> lower: one switch link
    ("bigraph:4x8", 0, 4, (0, 32, 36, 33, 4)),     # upper -> upper: through a lower switch
    ("bigraph:4x8", 16, 20, (16, 36, 32, 37, 20)),
    ("dgx2:16", 0, 7, (0, 16, 7)),
    ("dgx2:16", 9, 2, (9, 17, 16, 2)),
])
def test_routes(spec: str, a: int, b: int, route: tuple[int, ...]) -> None:
    assert parse_spec(spec).route(a, b) == route


@pytest.mark.parametrize("spec, diameter", [("fattree:8", 4), ("bigraph:4x8", 4), ("dgx2:16", 3)])
def test_diameter(spec: str, diameter: int) -> None:
    assert parse_spec(spec).diameter() == diameter


def test_not_routed_networks() -> None:
    assert not any(parse_spec(s).is_routed() for s in ("fattree:4", "bigraph:2x4", "dgx2:16"))


# ---------------------------------------------------------------------- options and names
def test_link_options() -> None:
    t = parse_spec("fattree:4:bw=25,lat=0.5")
    assert t.name == "fattree:4:bw=25,lat=0.5" and parse_spec(t.name) == t
    assert {(lk.bandwidth, lk.latency) for lk in t.links} == {(25.0, 0.5)}
    assert t.params == (("k", "4"), ("bandwidth", "25"), ("latency", "0.5"))
    assert bigraph(2, 4, bandwidth=12.5).name == "bigraph:2x4:bw=12.5"
    assert dgx2(16, latency=1).name == "dgx2:16:lat=1"


@pytest.mark.parametrize("spec, message", [
    ("fattree:1", ">= 2"),
    ("fattree:x", "positive integer"),
    ("fattree:4x4", "positive integer"),
    ("fattree:300", "more than"),
    ("fattree:4:uni", "unknown option"),
    ("fattree:4:bw=0", "bw must be"),
    ("bigraph:4", "RANKS_PER_SWITCHxSWITCHES"),
    ("bigraph:4x8x2", "RANKS_PER_SWITCHxSWITCHES"),
    ("bigraph:4x7", "even"),
    ("bigraph:0x8", ">= 1"),
    ("bigraph:4x0", ">= 2"),
    ("dgx2:15", "even"),
    ("dgx2:0", ">= 2"),
    ("dgx2:abc", "positive integer"),
    ("dgx2:16:lat=-1", "lat must be"),
])
def test_bad_specs(spec: str, message: str) -> None:
    with pytest.raises(TopologyError, match=message):
        parse_spec(spec)


@pytest.mark.parametrize("call, message", [
    (lambda: fattree(True), "integer"),  # type: ignore[arg-type]
    (lambda: fattree(2.0), "integer"),  # type: ignore[arg-type]
    (lambda: bigraph(4, 6.0), "integer"),  # type: ignore[arg-type]
    (lambda: bigraph(-1, 4), ">= 1"),
    (lambda: dgx2(7), "even"),
    (lambda: fattree(4, bandwidth=-1), "bandwidth"),
])
def test_bad_arguments(call: Callable[[], Topology], message: str) -> None:
    with pytest.raises(TopologyError, match=message):
        call()
