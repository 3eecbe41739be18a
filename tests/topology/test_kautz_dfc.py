"""Topology families kautz:D,K, dfc:M2xM1 (n-D) and dragonfly:A,G (docs/kautz-dfc.md)."""

from __future__ import annotations

import pytest

from collc.errors import TopologyError
from collc.topology import Topology, parse_spec
from collc.topology.kautz_dfc import dfc_dims, kautz_label, kautz_params, kautz_rank


@pytest.mark.parametrize("spec, n, links, diameter", [
    ("kautz:2,2", 6, 12, 2), ("kautz:3,2", 12, 36, 2), ("kautz:2,3", 12, 24, 3), ("kautz:4,1", 5, 20, 1),
    ("dfc:3x3", 9, 36, 2), ("dfc:4x3", 12, 60, 2), ("dfc:2x3x4", 24, 144, 3), ("dragonfly:3,4", 12, 60, 2),
])
def test_sizes_names_cycles(spec: str, n: int, links: int, diameter: int) -> None:
    t = parse_spec(spec)
    assert (t.nranks, len(t.links), t.diameter()) == (n, links, diameter)
    assert parse_spec(t.name) == t and Topology.from_dict(t.to_dict()) == t
    if t.cycle is not None:   # checked by Topology: consecutive ranks are linked
        assert sorted(t.cycle) == list(range(n))


def test_kautz_is_directed_with_one_reverse_neighbour() -> None:
    t = parse_spec("kautz:3,2")
    assert not t.is_routed() and kautz_params(t) == (3, 2)
    for r in t.ranks:
        assert len(t.out_neighbors(r)) == 3 and len(t.in_neighbors(r)) == 3
        both = set(t.out_neighbors(r)) & set(t.in_neighbors(r))
        a, b = kautz_label(r, 3, 2)
        assert both == {kautz_rank(b + a, 3, 2)}
    # the (2,3) words: lexicographic ranks, x -> y when y drops x's first letter
    t3 = parse_spec("kautz:2,3")
    assert kautz_label(0, 2, 3) == "010" and [kautz_label(v, 2, 3) for v in t3.out_neighbors(0)] == ["101", "102"]


def test_every_kautz_and_dfc_has_a_cycle() -> None:
    for spec in ("kautz:4,2", "kautz:16,2", "kautz:2,3", "dfc:5x5", "dfc:3x2", "dfc:7x4", "dragonfly:4,5",
                 "dfc:3x4x3", "dfc:5x3x2"):
        assert parse_spec(spec).cycle is not None
    assert parse_spec("dfc:3x3x3").cycle is None   # n-D with every size odd: none recorded


def test_dragonfly_is_the_2dfc() -> None:
    df, fc = parse_spec("dragonfly:3,4"), parse_spec("dfc:4x3")
    assert df.links == fc.links and dfc_dims(df) == dfc_dims(fc) == (4, 3)
    assert df.is_routed() and fc.is_routed()
    assert parse_spec("dragonfly:3,4,3").links == df.links


@pytest.mark.parametrize("spec, message", [
    ("kautz:1,2", "degree d >= 2"), ("kautz:2", "DEGREE,DIAMETER"), ("kautz:2,0", "diameter k >= 1"),
    ("kautz:300,2", "more than"), ("dfc:1x4", ">= 2"), ("dfc:4x", "sizes separated"),
    ("dragonfly:3,4,2", "h = G-1"), ("dragonfly:3", "A,G"), ("kautz:2,2:uni", "unknown option"),
])
def test_bad_specs(spec: str, message: str) -> None:
    with pytest.raises(TopologyError, match=message):
        parse_spec(spec)
