"""HammingMesh and 2D HyperX families (Swing NSDI'24 section 5.4; reference/swing.md section 4)."""

from __future__ import annotations

import pytest

from collc.errors import TopologyError
from collc.sim.routing import Router
from collc.topology import parse_spec
from collc.topology.generators import hammingmesh, hyperx


# ---------------------------------------------------------------------- HyperX
@pytest.mark.parametrize("spec, nlinks", [("hyperx:2x2", 8), ("hyperx:3x4", 60), ("hyperx:4x4", 96)])
def test_hyperx_links(spec: str, nlinks: int) -> None:
    t = parse_spec(spec)
    rows, cols = (int(x) for x in spec.split(":")[1].split("x"))
    assert t.nranks == rows * cols and t.nswitches == 0
    assert len(t.links) == nlinks == rows * cols * (rows + cols - 2)
    assert t.is_bidirectional() and t.is_routed()
    assert t.param("dims") == f"{rows}x{cols}"
    for r in range(t.nranks):
        same_line = {v for v in range(t.nranks) if v != r and (v // cols == r // cols or v % cols == r % cols)}
        assert set(t.out_neighbors(r)) == same_line


def test_hyperx_routes() -> None:
    t = parse_spec("hyperx:3x4")
    assert t.route(0, 3) == (0, 3)          # same row
    assert t.route(0, 8) == (0, 8)          # same column
    assert t.route(0, 5) is None            # neither: two hops through the network
    assert t.distance(0, 5) == 2 and t.diameter() == 2
    assert Router(t).hops(0, 5) == 2


@pytest.mark.parametrize("spec", ["hyperx:4x4", "hyperx:3x4", "hyperx:4x3", "hyperx:2x2:bw=25,lat=0.5"])
def test_hyperx_canonical_and_cycle(spec: str) -> None:
    t = parse_spec(spec)
    assert t.name == spec and parse_spec(t.name) == t
    cycle = t.hamiltonian_cycle()
    assert cycle is not None and sorted(cycle) == list(range(t.nranks))
    assert all(t.has_link(a, b) for a, b in zip(cycle, cycle[1:] + cycle[:1]))


def test_hyperx_odd_has_no_recorded_cycle() -> None:
    assert parse_spec("hyperx:3x3").cycle is None


# ---------------------------------------------------------------------- HammingMesh
def test_hammingmesh_2x2_boards() -> None:
    t = parse_spec("hammingmesh:2x2:2x2")
    assert (t.name, t.nranks, t.nswitches) == ("hammingmesh:2x2:2x2", 16, 8)
    # 4 boards x 4 mesh edges x 2 ways + 8 lines x 4 edge ranks x 2 ways
    assert len(t.links) == 32 + 64
    assert t.is_routed() and t.is_bidirectional()
    assert dict(t.params) == {"board": "2x2", "arrangement": "2x2", "dims": "4x4", "routing": "network"}
    assert t.route(0, 1) == (0, 1)          # on the board
    assert t.route(0, 4) == (0, 4)
    assert t.route(0, 2) == (0, 16, 2)      # row 0's switch (node 16) to the next board
    assert t.route(0, 3) == (0, 16, 3)
    assert t.route(0, 8) == (0, 20, 8)      # column 0's switch (node 16 + 4)
    assert t.route(0, 5) is None            # same board, not adjacent: two hops
    assert t.distance(0, 5) == 2 and t.distance(0, 10) == 4


def test_hammingmesh_4x4_boards_edges_only() -> None:
    t = hammingmesh([4, 4], [2, 2])
    n = 64
    assert t.nranks == n and t.nswitches == 16
    # boards: 4 x 24 mesh edges x 2; lines: 16 lines x 4 edge ranks x 2
    assert len(t.links) == 4 * 24 * 2 + 16 * 4 * 2
    interior = 1 * 8 + 1  # global row 1, column 1: inside board (0, 0)
    assert all(v < n for v in t.out_neighbors(interior))
    assert sorted(v for v in t.out_neighbors(3) if v >= n) == [n + 0, n + 8 + 3]  # east edge, north edge


def test_hammingmesh_unit_boards_double_links() -> None:
    t = parse_spec("hammingmesh:1x1:3x3")
    assert t.nranks == 9 and t.nswitches == 6 and len(t.links) == 9 * 2 * 2
    link = t.link(0, 9)
    assert link is not None and link.multiplicity == 2  # west and east edge at once
    assert t.route(0, 1) == (0, 9, 1) and t.route(0, 3) == (0, 12, 3)


@pytest.mark.parametrize("spec", ["hammingmesh:2x2:32x32", "hammingmesh:4x4:16x16"])
def test_paper_sizes(spec: str) -> None:
    t = parse_spec(spec)
    assert t.nranks == 4096 and t.param("dims") == "64x64" and t.name == spec


def test_hammingmesh_options_round_trip() -> None:
    t = parse_spec("hammingmesh:2x1:2x3,bw=25,lat=0.1")
    assert t.name == "hammingmesh:2x1:2x3,bw=25,lat=0.1" and parse_spec(t.name) == t
    assert all(lk.bandwidth == 25 and lk.latency == 0.1 for lk in t.links)
    assert t.param("dims") == "4x3"


# ---------------------------------------------------------------------- invalid specs
@pytest.mark.parametrize("spec, match", [
    ("hyperx:4", "ROWSxCOLUMNS"),
    ("hyperx:4x4x4", "ROWSxCOLUMNS"),
    ("hyperx:1x4", ">= 2"),
    ("hyperx:4x4:uni", "unknown option"),
    ("hyperx:300x300", "more than"),
    ("hammingmesh:2x2", "arrangement"),
    ("hammingmesh:2x2:bw=2", "arrangement"),
    ("hammingmesh:2:4x4", "board must be"),
    ("hammingmesh:2x2:4x4x4", "arrangement"),
    ("hammingmesh:0x2:4x4", ">= 1"),
    ("hammingmesh:2x2:1x4", ">= 2"),
    ("hammingmesh:2x2:4x4,uni", "unknown option"),
    ("hammingmesh:2x2:4x4,bw=-1", "bw must be"),
    ("hammingmesh:16x16:32x32", "more than"),
])
def test_invalid_specs(spec: str, match: str) -> None:
    with pytest.raises(TopologyError, match=match):
        parse_spec(spec)


def test_invalid_generator_arguments() -> None:
    with pytest.raises(TopologyError, match="two integers"):
        hyperx([4])
    with pytest.raises(TopologyError, match="integers"):
        hammingmesh([2, True], [4, 4])
    with pytest.raises(TopologyError, match="bandwidth"):
        hammingmesh([2, 2], [2, 2], bandwidth=0)
