"""The Swing paper's torus baselines (reference/swing.md sections 2 and 3).

``collc.frontends.torus_baselines`` is imported first so that its algorithms are
registered before ``build_schedule`` runs.
"""

from __future__ import annotations

from collections import Counter

import pytest

import collc.frontends.torus_baselines as tb
from collc.driver import compile_xml
from collc.errors import ScheduleError
from collc.frontends.registry import build_schedule
from collc.ir.collective import CollKind
from collc.ir.schedule import Schedule
from collc.ir.verify import verify_schedule
from collc.sim.analysis import congestion_deficiency, link_loads, step_loads
from collc.sim.routing import Router
from collc.topology import Topology, parse_spec

AR = CollKind.ALLREDUCE
BASELINES = [
    ("recursive-doubling-torus", {"variant": "bandwidth"}),
    ("recursive-doubling-torus", {"variant": "latency"}),
    ("mirrored-recursive-doubling", {"variant": "bandwidth"}),
    ("mirrored-recursive-doubling", {"variant": "latency"}),
    ("bucket", {}),
    ("hamiltonian-rings", {}),
]


def build(alg: str, spec: str, params: dict[str, str] | None = None, inplace: bool = True) -> Schedule:
    return build_schedule(alg, parse_spec(spec), AR, inplace, None, params)


def max_messages(schedule: Schedule, topology: Topology) -> list[float]:
    return [s.max_messages for s in step_loads(schedule, Router(topology), 1.0)]


# ---------------------------------------------------------------------- end to end
@pytest.mark.parametrize("spec", ["torus:4x4", "torus:8x8"])
@pytest.mark.parametrize("alg, params", BASELINES, ids=[f"{a}-{p.get('variant', '')}" for a, p in BASELINES])
@pytest.mark.parametrize("inplace", [True, False], ids=["inplace", "outofplace"])
def test_compile_and_check(spec: str, alg: str, params: dict[str, str], inplace: bool) -> None:
    compiled = compile_xml(parse_spec(spec), alg, AR, inplace=inplace, params=params)
    assert compiled.report.ok, compiled.report


@pytest.mark.parametrize("spec", ["torus:16", "torus:2x4", "torus:4x4x4", "hyperx:4x4", "hammingmesh:2x2:2x2"])
@pytest.mark.parametrize("alg, params", BASELINES[:5], ids=[f"{a}-{p.get('variant', '')}" for a, p in BASELINES[:5]])
def test_other_grids_verify(spec: str, alg: str, params: dict[str, str]) -> None:
    verify_schedule(build(alg, spec, params), parse_spec(spec))


# ---------------------------------------------------------------------- step counts
@pytest.mark.parametrize("alg, params, spec, steps", [
    ("recursive-doubling-torus", {"variant": "bandwidth"}, "torus:8x8", 12),   # 2 log2 p
    ("recursive-doubling-torus", {"variant": "latency"}, "torus:8x8", 6),      # log2 p
    ("recursive-doubling-torus", {"variant": "bandwidth"}, "torus:4x8", 10),
    ("mirrored-recursive-doubling", {"variant": "bandwidth"}, "torus:8x8", 12),
    ("mirrored-recursive-doubling", {"variant": "latency"}, "torus:4x4x4", 6),
    ("bucket", {}, "torus:8x8", 28),                                           # 2 D (d - 1)
    ("bucket", {}, "torus:2x4", 12),                                           # lockstep: 2 D (d_max - 1)
    ("bucket", {}, "torus:4x4x4", 18),
    ("hamiltonian-rings", {}, "torus:4x4", 30),                                # 2 (p - 1)
    ("hamiltonian-rings", {}, "torus:4x8", 62),
])
def test_step_counts(alg: str, params: dict[str, str], spec: str, steps: int) -> None:
    assert build(alg, spec, params).nsteps == steps
    assert build(alg, spec, params, inplace=False).nsteps == steps + 1  # local copy first


def test_lanes_and_shares() -> None:
    s = build("mirrored-recursive-doubling", "torus:4x4x4")
    assert s.lanes == 6 and s.collective.chunk_factor == 6 * 64
    assert build("bucket", "torus:8x8").lanes == 4
    assert build("recursive-doubling-torus", "torus:8x8").lanes == 1


# ---------------------------------------------------------------------- the paper's numbers
def test_rd_bandwidth_xi_8x8() -> None:
    t = parse_spec("torus:8x8")
    s = build("recursive-doubling-torus", "torus:8x8")
    psi_xi = congestion_deficiency(s, t)          # Psi x Xi, Psi = 2D = 4 (one port of four)
    assert psi_xi == pytest.approx(4.875)
    assert round(psi_xi / 4, 4) == 1.2188          # swing.md section 3 table


def test_rd_bandwidth_per_step_maxima_64x64() -> None:
    t = parse_spec("torus:64x64")
    s = build("recursive-doubling-torus", "torus:64x64")
    loads = max_messages(s, t)
    rs = [1, 1, 2, 2, 4, 4, 8, 8, 16, 16, 16, 16]
    assert loads == rs + rs[::-1]                   # the allgather mirrors the reduce-scatter


def test_rd_peers_follow_dimensions() -> None:
    """Fig. 2 (4x4): distance 1 in x, 1 in y, 2 in x, 2 in y; rank = y*4 + x."""
    s = build("recursive-doubling-torus", "torus:4x4", {"variant": "latency"})
    assert [next(t.dst for t in s.step(k) if t.src == 0) for k in range(4)] == [1, 4, 2, 8]


@pytest.mark.parametrize("variant", ["latency", "bandwidth"])
def test_fig1_rd_1d_16(variant: str) -> None:
    """Fig. 1: on 16 nodes, RD sends 2 messages over link 1-2 at step 1 and 4 over 3-4 at step 2."""
    t = parse_spec("torus:16")
    s = build("recursive-doubling-torus", "torus:16", {"variant": variant})
    loads = link_loads(s, Router(t), 1.0)
    assert loads[1][(1, 2)][1] == 2 and loads[1][(2, 1)][1] == 2
    assert loads[2][(3, 4)][1] == 4
    assert max_messages(s, t)[:4] == [1, 2, 4, 4]    # swing.md section 3: RD [1,2,4,4]


def test_mirrored_rd_uses_distinct_ports_first_step() -> None:
    t = parse_spec("torus:8x8")
    s = build("mirrored-recursive-doubling", "torus:8x8")
    first = [t for t in s.step(0) if t.src == 0]
    assert sorted(t.dst for t in first) == [1, 7, 8, 56]   # +x, -x, +y, -y
    assert max_messages(s, t)[0] == 1
    assert congestion_deficiency(s, t) > congestion_deficiency(build("bucket", "torus:8x8"), t)


@pytest.mark.parametrize("alg, spec", [("bucket", "torus:8x8"), ("bucket", "torus:4x4x4"),
                                       ("hamiltonian-rings", "torus:8x8"), ("hamiltonian-rings", "torus:4x8")])
def test_one_message_per_link_per_step(alg: str, spec: str) -> None:
    t = parse_spec(spec)
    s = build(alg, spec)
    assert set(max_messages(s, t)) == {1.0}
    assert congestion_deficiency(s, t) == pytest.approx((t.nranks - 1) / t.nranks)  # Psi = Xi = 1


# ---------------------------------------------------------------------- Hamiltonian rings
@pytest.mark.parametrize("rows, cols", [(3, 3), (4, 4), (8, 8), (8, 4), (4, 8), (9, 3), (5, 5)])
def test_hamiltonian_decomposition(rows: int, cols: int) -> None:
    t = parse_spec(f"torus:{rows}x{cols}")
    cycles = tb.hamiltonian_decomposition(rows, cols)
    assert cycles is not None
    edges: list[Counter[frozenset[int]]] = []
    for cyc in cycles:
        assert sorted(cyc) == list(range(t.nranks))
        pairs = list(zip(cyc, cyc[1:] + cyc[:1]))
        assert all(t.has_link(a, b) for a, b in pairs)
        edges.append(Counter(frozenset(p) for p in pairs))
    assert not set(edges[0]) & set(edges[1])                 # edge-disjoint
    assert len(edges[0]) + len(edges[1]) == 2 * t.nranks     # together: every torus edge


@pytest.mark.parametrize("spec", ["torus:6x4", "torus:3x6", "torus:2x4", "torus:4x6"])
def test_hamiltonian_rings_error(spec: str) -> None:
    with pytest.raises(ScheduleError, match="edge-disjoint Hamiltonian cycles"):
        build("hamiltonian-rings", spec)


@pytest.mark.parametrize("alg, spec, match", [
    ("hamiltonian-rings", "torus:16", "2D torus"),
    ("hamiltonian-rings", "hyperx:4x4", "2D torus"),
    ("recursive-doubling-torus", "torus:6x4", "power-of-two"),
    ("mirrored-recursive-doubling", "torus:4x3", "power-of-two"),
    ("bucket", "ring:8:uni", "one way only"),
    ("recursive-doubling-torus", "hypercube:3", "routed grid"),
])
def test_bad_topologies(alg: str, spec: str, match: str) -> None:
    with pytest.raises(ScheduleError, match=match):
        build(alg, spec)


def test_bad_variant() -> None:
    with pytest.raises(ScheduleError, match="choose one of"):
        build("recursive-doubling-torus", "torus:4x4", {"variant": "fast"})


def test_bucket_non_power_of_two() -> None:
    t = parse_spec("torus:3x5")
    verify_schedule(build("bucket", "torus:3x5", inplace=False), t)
    assert build("bucket", "torus:3x5").nsteps == 16


@pytest.mark.parametrize("name, params", BASELINES[:5])
def test_1d_baselines_relay_on_a_ring(name: str, params: dict[str, str]) -> None:
    """On ``ring:8`` (the 1-D torus whose ranks forward nothing) the baselines' distant
    partners are relayed: every send of the emitted XML goes to a neighbour, and the chunks
    each directed link carries in the XML equal the minimal-routing load of ``torus:8``."""
    from collc.compiler.msccl.program import SENDS
    ring = compile_xml(parse_spec("ring:8"), name, AR, params=params)
    assert ring.report.ok
    xml: Counter[tuple[int, int]] = Counter()
    for g in ring.program.gpus:
        for t in g.tbs:
            xml[(g.id, t.send)] += sum(st.cnt for st in t.steps if st.type in SENDS)
    del xml[(0, -1)]
    xml = Counter({k: v for k, v in xml.items() if v})
    assert all((b - a) % 8 in (1, 7) for a, b in xml)
    torus = build_schedule(name, parse_spec("torus:8"), AR, inplace=True, params=params)
    want: Counter[tuple[int, int]] = Counter()
    for step in link_loads(torus, Router(parse_spec("torus:8")), float(torus.collective.nchunksperloop)):
        for link, (chunks, _) in step.items():
            want[link] += chunks
    assert xml == Counter({k: int(v) for k, v in want.items()})


def test_one_way_ring_is_refused_by_the_baselines() -> None:
    with pytest.raises(ScheduleError, match="one way only"):
        build_schedule("bucket", parse_spec("ring:8:uni"), AR, inplace=True)
